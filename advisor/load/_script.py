"""Read a verl launch script (bash) and recover the Hydra overrides it passes to verl.

A small, safe interpreter for the subset of bash that launch scripts use: variable assignments
(``VAR=...``, ``export``, ``${VAR:-default}``, ``${VAR:+alt}``), ``$((...))`` integer arithmetic,
quoting, line continuations, comments, simple ``if [ ... ]`` tests, and the one command that starts
verl (``python3 -m verl.trainer.main_ppo ...`` or a recipe entry point such as
``recipe.dapo.main_dapo``, possibly behind ``ray job submit ... --``). Nothing is executed:
command substitutions ``$(...)`` and variables the script does not define stay as text and are
reported, never guessed.
"""

from __future__ import annotations

import ast
import fnmatch
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from advisor.errors import ConfigError
from advisor.operators import compare
from advisor.verl import (
    EntryPoint,
    find_entry_point,
    is_entry_module,
    recipe_folder_entry_points,
    resolve_module,
)

# ---------------------------------------------------------------------------------------------
# Lexer: text -> tokens (words made of parts, operators, newlines), with line numbers.


@dataclass
class _Lit:
    """Literal text of a word."""

    text: str
    quoted: bool


@dataclass
class _Var:
    """A parameter expansion: ``$name`` or ``${name<op><arg>}``."""

    name: str
    op: str | None  # ":-", "-", ":=", "=", ":+", "+", ":?", "?", "#" (length) or None
    arg: list[_Part] | None
    quoted: bool


@dataclass
class _Arith:
    """An arithmetic expansion ``$(( ... ))``."""

    expr: list[_Part]
    quoted: bool


@dataclass
class _CmdSub:
    """A command substitution (``$( ... )`` or backquotes), kept as its text."""

    text: str  # shown as-is in values that use it
    quoted: bool


_Part = _Lit | _Var | _Arith | _CmdSub


@dataclass
class _Token:
    """A word, an operator, a redirection or a newline, with its line."""

    kind: str  # "word" | "op" | "redir" | "newline"
    line: int
    parts: list[_Part] = field(default_factory=list)
    op: str = ""
    has_target: bool = False  # redirections like '> file' take the next word
    elements: list[_Token] | None = None  # NAME=( ... ): the array's element words

    def raw(self) -> str:
        """The word's text when it is plain unquoted literal (keywords, names), else ''."""
        plain = [p.text for p in self.parts if isinstance(p, _Lit) and not p.quoted]
        return "".join(plain) if self.kind == "word" and len(plain) == len(self.parts) else ""


_OPERATORS = ("&&", "||", ";;", ";", "|", "&", "(", ")")
_REDIRECTION = re.compile(r"\d*(?:&>>|&>|>>|>\||>&|<&|<<<|<<|>|<)(?:-|\d+)?")
_PLACEHOLDER = re.compile(r"<[A-Za-z_][\w.\-/]*>")
_HEREDOC = re.compile(r"""<<(-?)\s*(['"]?)(\w+)\2""")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL_PARAM = re.compile(r"[0-9@*#?$!-]")
_WORD_END = set(" \t\r\n;&|()<>")


class _Lexer:
    def __init__(self, text: str, path: str, line: int = 1) -> None:
        self.text = text
        self.path = path
        self.i = 0
        self.line = line
        self.heredocs: list[tuple[str, bool]] = []  # (delimiter, strip leading tabs) awaiting their body

    def skip_heredocs(self) -> None:
        """Skip the bodies of here-documents opened on the line just ended (their text is data)."""
        for delimiter, strip_tabs in self.heredocs:
            while self.i < len(self.text):
                end = self.text.find("\n", self.i)
                end = len(self.text) if end < 0 else end
                line = self.text[self.i : end]
                self.advance(end - self.i + 1)
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
        self.heredocs.clear()

    def error(self, message: str) -> ConfigError:
        return ConfigError(message, path=self.path, where=self.line)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < len(self.text) else ""

    def advance(self, n: int = 1) -> str:
        chunk = self.text[self.i : self.i + n]
        self.line += chunk.count("\n")
        self.i += n
        return chunk

    def tokens(self) -> list[_Token]:
        out: list[_Token] = []
        while self.i < len(self.text):
            c = self.peek()
            if c == "\\" and self.peek(1) in ("\n", ""):  # continuation (bash ignores one at EOF)
                self.advance(2)
            elif c in " \t\r":
                self.advance()
            elif c == "\n":
                out.append(_Token("newline", self.line))
                self.advance()
                self.skip_heredocs()
            elif c == "#":  # a comment starts only where a word would start
                while self.i < len(self.text) and self.peek() != "\n":
                    self.advance()
            elif m := _REDIRECTION.match(self.text, self.i):
                text = m.group()
                if doc := _HEREDOC.match(self.text, self.i):
                    self.heredocs.append((doc.group(3), bool(doc.group(1))))
                out.append(_Token("redir", self.line, op=text, has_target=not re.search(r"&(\d+|-)$", text)))
                self.advance(len(text))
            elif op := next((o for o in _OPERATORS if self.text.startswith(o, self.i)), None):
                out.append(_Token("op", self.line, op=op))
                self.advance(len(op))
            else:
                line = self.line
                out.append(_Token("word", line, parts=self.word()))
        out.append(_Token("newline", self.line))
        return _group_arrays(out)

    def word(self) -> list[_Part]:
        parts: list[_Part] = []
        buf: list[str] = []

        def flush() -> None:
            if buf:
                parts.append(_Lit("".join(buf), False))
                buf.clear()

        while self.i < len(self.text):
            c = self.peek()
            if c == "<" and buf and (m := _PLACEHOLDER.match(self.text, self.i)):
                # `key=<path_to_model>`: a template placeholder (bash would read a redirection and fail);
                # keep it as text so the override is reported as a placeholder to fill in
                buf.append(self.advance(len(m.group())))
                continue
            if c in _WORD_END:
                break
            if c == "\\":
                if self.peek(1) in ("\n", ""):
                    self.advance(2)
                    continue
                buf.append(self.peek(1))
                self.advance(2)
            elif c == "'":
                flush()
                parts.append(self.single_quoted())
            elif c == '"':
                flush()
                self.advance()
                parts.extend(self.double_quoted())
            elif c == "$":
                flush()
                parts.append(self.dollar(quoted=False))
            elif c == "`":
                flush()
                parts.append(self.backquoted(quoted=False))
            else:
                buf.append(c)
                self.advance()
        flush()
        return parts

    def single_quoted(self) -> _Lit:
        self.advance()
        end = self.text.find("'", self.i)
        if end < 0:
            raise self.error("unterminated single quote")
        lit = _Lit(self.advance(end - self.i), True)
        self.advance()
        return lit

    def backquoted(self, quoted: bool) -> _CmdSub:
        self.advance()
        end = self.text.find("`", self.i)
        if end < 0:
            raise self.error("unterminated backquote")
        body = self.advance(end - self.i)
        self.advance()
        return _CmdSub(f"`{body}`", quoted)

    def double_quoted(self) -> list[_Part]:
        parts: list[_Part] = []
        buf: list[str] = []

        def flush() -> None:
            if buf:
                parts.append(_Lit("".join(buf), True))
                buf.clear()

        while True:
            if self.i >= len(self.text):
                raise self.error("unterminated double quote")
            c = self.peek()
            if c == '"':
                self.advance()
                break
            if c == "\\" and self.peek(1) in '$`"\\\n':
                if self.peek(1) != "\n":
                    buf.append(self.peek(1))
                self.advance(2)
            elif c == "$":
                flush()
                parts.append(self.dollar(quoted=True))
            elif c == "`":
                flush()
                parts.append(self.backquoted(quoted=True))
            else:
                buf.append(c)
                self.advance()
        flush()
        if not parts:
            parts.append(_Lit("", True))  # "" is an empty word, not no word
        return parts

    def balanced(self, open_: str, close: str) -> str:
        """Text up to the matching close bracket (the opening one already consumed)."""
        depth, start, quote = 1, self.i, ""
        while self.i < len(self.text):
            c = self.peek()
            if quote:
                if c == quote:
                    quote = ""
                elif c == "\\" and quote == '"':
                    self.advance()
            elif c in "'\"":
                quote = c
            elif c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    body = self.text[start : self.i]
                    self.advance()
                    return body
            self.advance()
        raise self.error(f"unterminated '{open_}'")

    def dollar(self, quoted: bool) -> _Part:
        self.advance()  # '$'
        line = self.line
        if self.text.startswith("((", self.i):
            self.advance(2)
            body = self.balanced("(", ")")
            if self.peek() != ")":
                raise self.error("unterminated $(( ... ))")
            self.advance()
            return _Arith(_Lexer(body, self.path, line).literal_word(quoted=True), quoted)
        if self.peek() == "(":
            self.advance()
            return _CmdSub(f"$({self.balanced('(', ')')})", quoted)
        if self.peek() == "{":
            self.advance()
            return self.braced(quoted, line)
        if m := _NAME.match(self.text, self.i):
            self.advance(len(m.group()))
            return _Var(m.group(), None, None, quoted)
        if _SPECIAL_PARAM.match(self.peek()):
            return _Var(self.advance(), None, None, quoted)
        return _Lit("$", quoted)

    def braced(self, quoted: bool, line: int) -> _Part:
        body = self.balanced("{", "}")
        if body.startswith("#") and len(body) > 1:
            return _Var(body[1:], "#", None, quoted)
        m = _NAME.match(body) or re.match(r"[0-9]+|[@*#?$!-]", body)
        if not m:
            raise self.error(f"cannot read '${{{body}}}'")
        name, rest = m.group(), body[m.end() :]
        if not rest or (name in ("@", "*") and rest.startswith(":")):  # ${@:2}: the script's arguments
            return _Var(name, None, None, quoted)
        if index := re.fullmatch(r"\[(@|\*|\d+)\]", rest):  # ${ARR[@]}, ${ARR[*]}, ${ARR[0]}
            return _Var(name, f"[{index.group(1)}]", None, quoted)
        op_match = re.match(r":?[-=+?]", rest)
        if not op_match:  # ${VAR/pat/rep}, ${VAR:0:3}, ${VAR%sfx}, ... are not modelled
            return _CmdSub("${" + body + "}", quoted)
        op = op_match.group()
        arg = _Lexer(rest[len(op) :], self.path, line).literal_word(quoted=quoted)
        return _Var(name, op, arg, quoted)

    def literal_word(self, quoted: bool) -> list[_Part]:
        """The rest of the text as one word in which blanks are literal (for ${x:-a b} and $((...)))."""
        parts: list[_Part] = []
        buf: list[str] = []

        def flush() -> None:
            if buf:
                parts.append(_Lit("".join(buf), quoted))
                buf.clear()

        while self.i < len(self.text):
            c = self.peek()
            if c == "$":
                flush()
                parts.append(self.dollar(quoted=quoted))
            elif c == '"':
                flush()
                self.advance()
                parts.extend(self.double_quoted())
            elif c == "'":
                flush()
                parts.append(self.single_quoted())
            elif c == "\\" and self.i + 1 < len(self.text):
                buf.append(self.peek(1))
                self.advance(2)
            else:
                buf.append(c)
                self.advance()
        flush()
        return parts


def _group_arrays(tokens: list[_Token]) -> list[_Token]:
    """Fold ``NAME=( a b ... )`` (which may span lines) into one word token carrying its elements."""
    out: list[_Token] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        head = tok.parts[0] if tok.kind == "word" and len(tok.parts) == 1 else None
        if (isinstance(head, _Lit) and not head.quoted and re.fullmatch(r"[A-Za-z_]\w*\+?=", head.text)
                and i + 1 < len(tokens) and tokens[i + 1].op == "("):
            j = i + 2
            elements = []
            while j < len(tokens) and tokens[j].op != ")":
                if tokens[j].kind == "word":
                    elements.append(tokens[j])
                j += 1
            tok.elements = elements
            out.append(tok)
            i = j + 1
        else:
            out.append(tok)
            i += 1
    return out


# ---------------------------------------------------------------------------------------------
# Expansion: words -> strings, tracking which undefined variables each string depends on.


COMMAND_SUBSTITUTION = "$(...)"  # stands for any command substitution in the unresolved sets
_OVERRIDE_KEY = re.compile(r"^[A-Za-z_][\w\-]*(\.[\w\-@]+)+$")
# A variable set inside a block the reader cannot evaluate ('if' on the environment, a loop, a 'case'):
# "<name> (line N)" in the unresolved sets; see unknown_branch_variable().
_BRANCH_MARK = re.compile(r"^(\w+) \((?:branches at )?line (\d+)\)$")


def unknown_branch_variable(name: str) -> tuple[str, int] | None:
    """(variable, line) when an unresolved name stands for a variable set in a block that was not evaluated."""
    m = _BRANCH_MARK.match(name)
    return (m.group(1), int(m.group(2))) if m else None


class _Unresolved(Exception):
    pass


_BLANK = " \t\n"


def _split_blanks(text: str) -> list[str]:
    """Split an unquoted expansion on blanks as bash does, except inside the text of a command
    substitution or arithmetic left unrun (``$(date +%F)``): that text stands for one unknown value."""
    if "$(" not in text:
        return re.split(r"[ \t\n]+", text)
    pieces: list[str] = []
    current: list[str] = []
    depth, i = 0, 0
    while i < len(text):
        if text.startswith("$(", i):
            depth += 1
            current.append("$(")
            i += 2
            continue
        c = text[i]
        if c in _BLANK and not depth:
            pieces.append("".join(current))
            current = []
            while i < len(text) and text[i] in _BLANK:
                i += 1
            continue
        depth += (c == "(" and depth > 0) - (c == ")" and depth > 0)
        current.append(c)
        i += 1
    pieces.append("".join(current))
    return pieces


def _piece_deps(piece: str, unresolved: set[str]) -> set[str]:
    """The undefined names one field split out of a tainted value depends on: none when the field holds
    no placeholder text (no ``$`` or backquote), else the names it mentions (all of them when it names
    none, to stay on the safe side)."""
    if not unresolved or not any(c in piece for c in "$`"):
        return set()
    named = {n for n in unresolved if (n == COMMAND_SUBSTITUTION and ("$(" in piece or "`" in piece))
             or re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", piece)}
    return named or set(unresolved)


def _truncating(fn: Callable[[int, int], int]) -> Callable[[int, int], int]:
    def op(a: int, b: int) -> int:
        if b == 0:
            raise ZeroDivisionError
        return fn(a, b)

    return op


def _int64(value: int) -> int:
    """Bash arithmetic is 64-bit signed and wraps (so 1<<(1<<34) is a number, not 2 GiB of one)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def _quotient(a: int, b: int) -> int:
    q = abs(a) // abs(b)  # exact for 64-bit operands (int(a / b) goes through a float)
    return q if (a >= 0) == (b >= 0) else -q


_ARITH_BINOPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: _truncating(_quotient),  # bash '/' truncates toward zero
    ast.Mod: _truncating(lambda a, b: a - b * _quotient(a, b)),
    ast.Pow: lambda a, b: pow(a, b, 1 << 64),
    ast.LShift: lambda a, b: a << (b & 63),  # x86-64 masks the shift count, as bash does there
    ast.RShift: lambda a, b: a >> (b & 63),
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_ARITH_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


MAX_VALUE = 1 << 20  # characters in one expanded word or variable
MAX_FIELDS = 100_000  # elements of one array
_ARITH_STEPS = 100_000  # nodes one $((...)) may visit, variables it names included (A=B+B, B=C+C, ...)


def arith_eval(expr: str, env: dict[str, str], _steps: list[int] | None = None) -> int:
    """Evaluate bash integer arithmetic by walking a whitelisted Python AST (never eval), in 64 bits."""
    steps = [0] if _steps is None else _steps
    if len(expr) > MAX_VALUE:
        raise ValueError(f"cannot evaluate an arithmetic expression of {len(expr):,} characters")
    text = re.sub(r"(?<![/])/(?![/])", "//", expr).replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    try:
        tree = ast.parse(text.strip() or "0", mode="eval")
    except (SyntaxError, ValueError) as err:
        raise ValueError(f"cannot evaluate $(({_clip(expr)}))") from err

    def walk(node: ast.AST) -> int:
        steps[0] += 1
        if steps[0] > _ARITH_STEPS:
            raise ValueError(f"cannot evaluate $(({_clip(expr)})): more than {_ARITH_STEPS:,} steps")
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return _int64(node.value)
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise _Unresolved(node.id)
            value = env[node.id].strip()
            return arith_eval(value, env, steps) if value else 0
        if isinstance(node, ast.UnaryOp):
            v = walk(node.operand)
            if isinstance(node.op, ast.USub):
                return _int64(-v)
            if isinstance(node.op, ast.Not):
                return int(not v)
            if isinstance(node.op, ast.Invert):
                return ~v
            return v
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_BINOPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and right < 0:
                raise ValueError(f"cannot evaluate $(({_clip(expr)})): a negative exponent")
            return _int64(_ARITH_BINOPS[type(node.op)](left, right))
        if isinstance(node, ast.BoolOp):
            values = [walk(v) for v in node.values]
            return int(all(values) if isinstance(node.op, ast.And) else any(values))
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _ARITH_COMPARE:
            return int(compare(_ARITH_COMPARE[type(node.ops[0])], walk(node.left), walk(node.comparators[0])))
        raise ValueError(f"cannot evaluate $(({_clip(expr)}))")

    try:
        return walk(tree)
    except ZeroDivisionError as err:
        raise ValueError(f"division by zero in $(({_clip(expr)}))") from err
    except (RecursionError, OverflowError, MemoryError) as err:
        raise ValueError(f"cannot evaluate $(({_clip(expr)}))") from err


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else f"{text[: limit - 20]}... ({len(text):,} characters)"


_Field = tuple[str, set[str]]  # an argument and the undefined names its text depends on


class _Expander:
    """Expands words against the script's variables.

    A variable whose value depends on something undefined keeps that text (``${HOME}/data``) and
    carries the undefined names along, so every value that uses it reports them.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.env: dict[str, str] = {}
        self.taint: dict[str, set[str]] = {}
        self.arrays: dict[str, list[_Field]] = {}

    def fields(self, parts: list[_Part], line: int) -> list[_Field]:
        """Expand a word into fields; unquoted expansions split on blanks, and ``"${A[@]}"`` gives
        one field per element, like bash."""
        fields: list[_Field] = []
        current: list[str] = []
        deps: set[str] = set()
        anchored = False  # the current field holds quoted or literal text, so it exists even if empty
        size = 0

        def close() -> None:
            nonlocal current, deps, anchored
            if current and ("".join(current) or anchored):
                fields.append(("".join(current), deps))
            current, deps, anchored = [], set(), False

        for part in parts:
            if isinstance(part, _Var) and part.op in ("[@]", "[*]") and part.name in self.arrays:
                elements = self.arrays[part.name]
                for k, (text, unres) in enumerate(elements):
                    size += len(text) + 1
                    self._bound(size, line)
                    if k > 0:
                        close()
                    pieces = [text] if part.quoted else re.split(r"[ \t\n]+", text)
                    for m, piece in enumerate(pieces):
                        if m > 0:
                            close()
                        current.append(piece)
                        deps |= unres
                        anchored = anchored or part.quoted
                continue
            text, splittable, unres = self.part(part, line)
            size += len(text)
            self._bound(size, line)
            if not splittable:
                deps |= unres
                current.append(text)
                anchored = True
                continue
            pieces = _split_blanks(text)
            for k, piece in enumerate(pieces):
                if k > 0:
                    close()
                deps |= _piece_deps(piece, unres) if len(pieces) > 1 else unres
                current.append(piece)
        close()
        return fields

    def text(self, parts: list[_Part], line: int) -> tuple[str, set[str]]:
        unresolved: set[str] = set()
        out: list[str] = []
        size = 0
        for part in parts:
            text, _, unres = self.part(part, line)
            size += len(text)
            self._bound(size, line)
            out.append(text)
            unresolved |= unres
        return "".join(out), unresolved

    def _bound(self, size: int, line: int, count: int = 0) -> None:
        """A word past MAX_VALUE (A=$A$A, 40 times, is 10 TiB) is no verl launch script's."""
        if count > MAX_FIELDS:
            raise ConfigError(f"an array grows past {MAX_FIELDS:,} elements (an array doubled again and again?); "
                              "a launch script's arrays are far shorter", path=self.path, where=line)
        if size > MAX_VALUE:
            raise ConfigError(f"a word grows past {MAX_VALUE // 2**20} MiB (a variable doubled again and again?); "
                              "a launch script's values are far shorter", path=self.path, where=line)

    def part(self, part: _Part, line: int) -> tuple[str, bool, set[str]]:
        if isinstance(part, _Lit):
            return part.text, False, set()
        if isinstance(part, _CmdSub):
            return part.text, False, {COMMAND_SUBSTITUTION}
        if isinstance(part, _Arith):
            expr, unres = self.text(part.expr, line)
            if unres:
                return f"$(({expr}))", False, unres
            try:
                return str(arith_eval(expr, self.env)), not part.quoted, set()
            except _Unresolved as missing:
                return f"$(({expr}))", False, {str(missing)} | self.taint.get(str(missing), set())
            except ValueError as err:
                raise ConfigError(str(err), path=self.path, where=line) from err
        return self.variable(part, line)

    def variable(self, var: _Var, line: int) -> tuple[str, bool, set[str]]:
        name, op = var.name, var.op
        if name in ("@", "*"):  # the script's arguments: the advisor's own KEY=VALUE play that role
            return "", True, set()
        if op is not None and op.startswith("["):
            elements = self.arrays.get(name)
            if elements is None:
                return (self.env[name], not var.quoted, self.taint.get(name, set())) if (
                    name in self.env and op in ("[0]", "[@]", "[*]")) else (f"${name}", False, {name})
            picked = elements if op in ("[@]", "[*]") else elements[int(op[1:-1]):int(op[1:-1]) + 1]
            deps = set().union(*(u for _, u in picked)) if picked else set()
            return " ".join(t for t, _ in picked), not var.quoted, deps
        if op is None and name in self.arrays and name not in self.env:
            first = self.arrays[name][:1]
            return (first[0][0], not var.quoted, first[0][1]) if first else ("", False, set())
        is_set = name in self.env
        value = self.env.get(name, "")
        taint = self.taint.get(name, set())
        split = not var.quoted  # unknown parts of the value stay whole (_split_blanks)
        if op == "#":
            return (str(len(value)), False, taint) if is_set else (f"$#{name}", False, {name})
        if op is None:
            return (value, split, taint) if is_set else (f"${name}", False, {name})
        assert var.arg is not None
        present = is_set and (bool(value) or not op.startswith(":"))
        if op.endswith(("-", "=")):
            if present:
                return value, split, taint
            text, unres = self.text(var.arg, line)
            if op.endswith("="):
                self.env[name], self.taint[name] = text, unres
            return text, split, unres
        if op.endswith("+"):
            if not present:
                return "", False, set()
            text, unres = self.text(var.arg, line)
            return text, split, unres | taint
        return (value, split, taint) if present else (f"${name}", False, {name})  # ${VAR:?msg}

    def assign_array(self, name: str, elements: list[_Token], append: bool = False) -> None:
        values = [f for w in elements for f in self.fields(w.parts, w.line)]
        values = (self.arrays.get(name, []) if append else []) + values
        self._bound(sum(len(text) + 1 for text, _ in values), elements[0].line if elements else 0, len(values))
        self.arrays[name] = values
        self.env.pop(name, None)

    def assign(self, name: str, parts: list[_Part], line: int, append: bool = False) -> None:
        value, unresolved = self.text(parts, line)
        if append:
            self._bound(len(self.env.get(name, "")) + len(value), line)
            value = self.env.get(name, "") + value
            unresolved |= self.taint.get(name, set())
        self.env[name] = value
        self.taint[name] = unresolved


# ---------------------------------------------------------------------------------------------
# Interpreter: commands -> variables and the verl command.


@dataclass
class LaunchCommand:
    """The verl command found in a launch script."""

    entry_point: str  # "verl.trainer.main_ppo", "recipe.dapo.main_dapo", ...
    argv: list[str]  # the command as bash would run it (unresolved parts left as text)
    overrides: list[str]  # Hydra overrides, in order
    override_lines: list[int]  # the script line of each override
    config_name: str | None
    config_path: str | None
    line: int
    unresolved: dict[str, list[str]]  # undefined variable -> override keys whose value used it
    notes: list[str] = field(default_factory=list)
    # override keys an array set in a block that is not evaluated may add -> that line ("if DEVICE=npu, add
    # rollout.data_parallel_size=8"): checks on them cannot be sure of the value verl gets
    maybe_set: dict[str, int] = field(default_factory=dict)
    # variables a 'case'/'if' branched on that the script leaves unknown -> the line (``--set-var`` decides)
    undecided: dict[str, int] = field(default_factory=dict)
    # the launch environment the user gave (``--set-var``), to read an edit of the script the same way
    variables: dict[str, str] = field(default_factory=dict)

    @property
    def entry(self) -> EntryPoint | None:
        """What the entry point runs (None: a module neither verl nor its recipes define)."""
        return find_entry_point(self.entry_point)

    @property
    def is_rl(self) -> bool:
        entry = self.entry
        return entry is None or entry.is_rl


# verl's and its recipes' entry points (knowledge/verl_defaults/recipes/index.yaml), or a module named like
# one (a fork's own recipe.<name>.main_<x>); verl.model_merger only counts when nothing else runs
_ENTRY_MODULE = re.compile(r"^(verl\.trainer\.main_\w+|recipe\.[\w.]+\.main_\w+)$")
_NON_RL = {"sft": "verl's SFT trainer", "evaluation": "an evaluation of generated responses",
           "generation": "generation only", "checkpoint-merge": "turns a checkpoint into a Hugging Face model"}
_PYTHON = re.compile(r"(^|/)(python[\d.]*|torchrun)$")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?=)")
_DECLARE = {"export", "declare", "local", "readonly", "typeset"}
_LOOPS = {"for": "done", "while": "done", "until": "done", "select": "done", "case": "esac"}
_LEADING_KEYWORDS = {"then", "else", "do", "{"}

_Command = list[_Token]


def _find_entry(argv: list[str], folder: str = "") -> tuple[int, str] | None:
    """(index just after the verl entry point, its module) in argv, or None. ``folder`` is the script's
    folder: a recipe's script may run its module relative to the recipe (``-m main_gkd``)."""
    for i, arg in enumerate(argv):
        if arg == "-m" and i + 1 < len(argv) and (module := _entry_module(argv[i + 1], folder)):
            return i + 2, module
        if i > 0 and _PYTHON.search(argv[i - 1]) and (module := _file_module(arg)) is not None:
            return i + 1, module
    return None


def _entry_module(module: str, folder: str) -> str | None:
    if _ENTRY_MODULE.match(module):
        return module
    return resolve_module(module, folder)


def _file_module(path: str) -> str | None:
    """The entry module a script path runs (``/w/verl/recipe/spo/spo_main_ppo.py`` -> ``recipe.spo.spo_main_ppo``)."""
    if not path.endswith(".py"):
        return None
    parts = path[:-3].split("/")
    for k, part in enumerate(parts):
        module = ".".join(parts[k:])
        if part in ("verl", "recipe") and re.fullmatch(r"[\w.]+", module) and \
                (_ENTRY_MODULE.match(module) or is_entry_module(module)):
            return module
    return None


def _split_commands(tokens: list[_Token]) -> list[_Command]:
    """Simple commands; reserved words that open a body (then/else/do/{) stand alone."""
    commands: list[_Command] = []
    current: _Command = []

    def close() -> None:
        nonlocal current
        while current and current[0].raw() in _LEADING_KEYWORDS and len(current) > 1:
            commands.append([current[0]])
            current = current[1:]
        if current:
            commands.append(current)
        current = []

    for tok in tokens:
        if tok.kind == "op" and tok.op == ";;":  # ends a case branch: kept as a marker for _case
            close()
            commands.append([tok])
        elif tok.kind == "newline" or (tok.kind == "op" and tok.op in (";", "&&", "||", "|", "&")):
            close()
        else:
            current.append(tok)
    close()
    return commands


@dataclass
class _State:
    """What running a block can change: the variables, arrays and what the reader noted."""

    env: dict[str, str]
    taint: dict[str, set[str]]
    arrays: dict[str, list[_Field]]
    maybe_set: dict[str, int]
    notes: list[str]
    command: LaunchCommand | None


def _arm_commands(commands: list[_Command]) -> list[_Command]:
    """A 'case' body's commands with each ``pattern) command`` split in two (``gpu) TP=2 ;;`` on one line), so a
    pattern always ends its own command."""
    out: list[_Command] = []
    for command in commands:
        close = next((k for k, t in enumerate(command) if t.kind == "op" and t.op in ("(", ")")), None)
        if close is not None and command[close].op == ")" and 0 < close < len(command) - 1:
            out += [command[: close + 1], command[close + 1 :]]
        else:
            out.append(command)
    return out


class _Interpreter:
    def __init__(self, path: str, variables: Mapping[str, str] | None = None) -> None:
        self.path = path
        self.expander = _Expander(path)
        for name, value in (variables or {}).items():  # what the user says the launch environment holds
            self.expander.env[name] = value
            self.expander.taint[name] = set()
        self.command: LaunchCommand | None = None
        self.notes: list[str] = []
        self.maybe_set: dict[str, int] = {}
        self.exited = False  # an 'exit' ran in the branch being followed: verl never starts down it
        self.undecided: dict[str, int] = {}  # a variable a 'case'/'if' could not decide on -> its line
        self.skipped = 0  # blocks left unevaluated (a loop): a branch holding one is not followed

    def _save(self) -> _State:
        e = self.expander
        return _State(dict(e.env), {k: set(v) for k, v in e.taint.items()}, {k: list(v) for k, v in e.arrays.items()},
                      dict(self.maybe_set), list(self.notes), self.command)

    def _load(self, state: _State) -> None:
        e = self.expander
        e.env, e.taint, e.arrays = dict(state.env), {k: set(v) for k, v in state.taint.items()}, \
            {k: list(v) for k, v in state.arrays.items()}
        self.maybe_set, self.notes, self.command = dict(state.maybe_set), list(state.notes), state.command

    def _follow_all(self, commands: list[_Command], bodies: list[tuple[int, int]], falls_through: bool,
                    line: int, subject: str | None, kind: str) -> bool:
        """Run every branch of a block whose test the reader cannot decide, each from the same state, and keep
        what every branch that goes on to verl agrees on (a branch that exits never reaches verl). A variable the
        branches set differently is unknown from here on. False: a branch runs a verl command, or another
        undecidable block, so the block is left unevaluated as before."""
        before = self._save()
        skipped = self.skipped
        outcomes: list[_State] = []
        for start, stop in bodies:
            self._load(before)
            self.exited = False
            self._block(commands, start, stop)
            exited = self.exited
            self.exited = False
            if self.command is not before.command or self.skipped != skipped:
                self._load(before)
                return False
            if not exited:
                outcomes.append(self._save())
        if falls_through:
            outcomes.append(before)
        self._load(before)
        for o in outcomes:  # what the branches noted, and the overrides they may add, stay known
            self.notes += [n for n in o.notes[len(before.notes):] if n not in self.notes]
            for key, at in o.maybe_set.items():
                self.maybe_set.setdefault(key, at)
        if subject:
            self.undecided.setdefault(subject, line)
        if not outcomes:
            self.exited = True
            return True
        e = self.expander
        differ: list[str] = []
        for name in sorted({n for o in outcomes for n in o.env}):
            values = {(o.env.get(name), frozenset(o.taint.get(name, set()))) for o in outcomes}
            if len(values) == 1:
                value, taint = values.pop()
                if value is None:
                    e.env.pop(name, None)
                    e.taint.pop(name, None)
                else:
                    e.env[name], e.taint[name] = value, set(taint)
            else:
                e.env[name] = f"${name}"
                e.taint[name] = {f"{name} (branches at line {line})"}
                differ.append(name)
        for name in sorted({n for o in outcomes for n in o.arrays}):
            if all(o.arrays.get(name) == outcomes[0].arrays.get(name) for o in outcomes):
                if outcomes[0].arrays.get(name) is not None:
                    e.arrays[name] = list(outcomes[0].arrays[name])
                continue
            # the arms disagree: what they all start with stays (an array the arms append to), the rest is unread
            lists = [o.arrays.get(name, []) for o in outcomes]
            common = 0
            while all(len(x) > common and x[common] == lists[0][common] for x in lists):
                common += 1
            e.arrays[name] = list(lists[0][:common])
            for elements in lists:
                for text, _ in elements[common:]:
                    key, sep, _ = text.lstrip("+~").partition("=")
                    if sep and _OVERRIDE_KEY.match(key):
                        self.maybe_set.setdefault(key, line)
            differ.append(f"{name} (the overrides it holds are not read)")
        if differ:
            on = f"'{subject}'" if subject else "a value"
            how = f" (--set-var {subject}=VALUE follows one)" if subject else ""
            self.notes.append(f"line {line}: '{kind}' on {on} the script does not set: its branches set "
                              f"{', '.join(differ)} differently, so their values are unknown{how}")
        return True

    def run(self, commands: list[_Command]) -> None:
        self._block(commands, 0, len(commands))

    def _block(self, commands: list[_Command], start: int, end: int) -> None:
        i = start
        while i < end:
            words = commands[i]
            head = words[0].raw()
            if head == "if":
                i = self._if(commands, i, end)
            elif head == "case":
                i = self._case(commands, i, end)
            elif head in _LOOPS:
                close = self._matching(commands, i, end, head, _LOOPS[head])
                self.notes.append(f"line {words[0].line}: '{head}' {'statement' if head == 'case' else 'loop'} "
                                  "not evaluated")
                self._unknown_assignments(commands, i + 1, close)
                i = close + 1
            elif head == "function" or (len(words) >= 3 and words[1].op == "(" and words[2].op == ")"):
                i = self._matching(commands, i, end, "{", "}") + 1
            else:
                self._simple(words)
                i += 1

    def _matching(self, commands: list[_Command], i: int, end: int, opener: str, closer: str) -> int:
        """Index of the command that closes the block opened at command i."""
        openers = {opener} | {k for k, v in _LOOPS.items() if v == closer}
        depth, seen = 0, False
        for j in range(i, end):
            raws = [w.raw() for w in commands[j]]
            if opener == "{":  # braces may share a line with other words: 'f() {', '}'
                depth += raws.count("{") - raws.count("}")
                seen = seen or "{" in raws
            else:  # keywords open and close blocks as the first word of a command
                depth += (raws[0] in openers) - (raws[0] == closer)
                seen = True
            if seen and depth <= 0:
                return j
        raise ConfigError(f"'{opener}' without '{closer}'", path=self.path, where=commands[i][0].line)

    def _case(self, commands: list[_Command], i: int, end: int) -> int:
        """Run the branch of ``case WORD in pat|pat) ... ;; esac`` whose glob matches WORD; if WORD depends on
        the environment, follow every branch and keep what they agree on (``_follow_all``)."""
        esac = self._matching(commands, i, end, "case", "esac")
        head = commands[i]
        line = head[0].line
        fields = self.expander.fields(head[1].parts, head[1].line) if len(head) >= 3 and head[2].raw() == "in" \
            else []
        region = _arm_commands(commands[i + 1 : esac])
        arms = self._arms(region)
        if len(fields) != 1 or fields[0][1]:
            subject = head[1].parts[0].name if len(head) >= 2 and len(head[1].parts) == 1 and \
                isinstance(head[1].parts[0], _Var) else None
            every = any(p.lstrip("(") == "*" for patterns, _, _ in arms for p in patterns)
            if arms and self._follow_all(region, [(b, e) for _, b, e in arms], not every, line, subject, "case"):
                return esac + 1
            self.notes.append(f"line {line}: 'case' on a value the script does not set; no branch applied")
            self._unknown_assignments(commands, i + 1, esac)
            return esac + 1
        value = fields[0][0]
        for patterns, body, stop in arms:
            if any(fnmatch.fnmatchcase(value, p.lstrip("(")) for p in patterns):
                self._block(region, body, stop)
                break
        return esac + 1

    def _arms(self, commands: list[_Command]) -> list[tuple[list[str], int, int]]:
        """(patterns, body start, body end) of each arm of a 'case' body (nested blocks stay whole)."""
        arms: list[tuple[list[str], int, int]] = []
        esac = len(commands)
        j = 0
        while j < esac:
            patterns: list[str] = []
            while j < esac and commands[j][-1].op != ")":  # alternatives split off by '|'
                patterns += self._words(commands[j])
                j += 1
            if j >= esac:
                break
            patterns += self._words(commands[j])
            body, depth, k = j + 1, 0, j + 1
            while k < esac:
                first = commands[k][0].raw()
                if first == "case":
                    depth += 1
                elif first == "esac":
                    depth -= 1
                elif depth == 0 and commands[k][0].op == ";;":
                    break
                k += 1
            arms.append((patterns, body, k))
            j = k + 1
        return arms

    def _words(self, command: _Command) -> list[str]:
        return [t for w in command if w.kind == "word" for t, _ in self.expander.fields(w.parts, w.line)]

    def _if(self, commands: list[_Command], i: int, end: int) -> int:
        """Run the branch whose ``[ test ]`` holds; if a test depends on the environment, run none."""
        fi = self._matching(commands, i, end, "if", "fi")
        branches: list[tuple[_Command, int, int]] = []  # (condition, body start, body end)
        else_start: int | None = None
        cond, body = commands[i][1:], None
        depth = 0
        for j in range(i + 1, fi):
            head = commands[j][0].raw()
            if head == "if":
                depth += 1
            elif head == "fi":
                depth -= 1
            elif depth == 0 and head == "then":
                body = j + 1
            elif depth == 0 and head in ("elif", "else"):
                if body is not None:
                    branches.append((cond, body, j))
                body, cond = None, commands[j][1:]
                if head == "else":
                    else_start = j + 1
        if body is not None:
            branches.append((cond, body, fi))
        for k, (condition, s, e) in enumerate(branches):
            verdict = self._test(condition)
            if verdict is None:
                rest = [(b, c) for _, b, c in branches[k:]] + ([(else_start, fi)] if else_start is not None else [])
                if self._follow_all(commands, rest, else_start is None, commands[i][0].line,
                                    self._subject(condition), "if"):
                    return fi + 1
                self.notes.append(f"line {commands[i][0].line}: 'if' test depends on the environment; "
                                  "no branch applied")
                self._unknown_assignments(commands, i + 1, fi)
                return fi + 1
            if verdict:
                self._block(commands, s, e)
                return fi + 1
        if else_start is not None:
            self._block(commands, else_start, fi)
        return fi + 1

    def _subject(self, condition: _Command) -> str | None:
        """The variable an undecidable test reads (the first one it names that the user could pass)."""
        for w in condition:
            for part in w.parts if w.kind == "word" else []:
                if isinstance(part, _Var) and part.name not in ("@", "*"):
                    return part.name
        return None

    def _unknown_assignments(self, commands: list[_Command], start: int, end: int) -> None:
        """Variables a block that is not evaluated may set: their value is unknown from here on (not the one
        they had before), so every key that uses one is reported as unresolved, never as a wrong value."""
        self.skipped += 1
        seen: set[str] = set()  # a variable's first assignment in the block names it
        for words in commands[start:end]:
            for w in (w for w in words if w.kind == "word"):
                assignment = self._assignment(w)
                if assignment is None or assignment[0] in seen:
                    continue
                name = assignment[0]
                seen.add(name)
                if w.elements is not None:  # an array: the overrides it may hold are not read
                    self.expander.arrays.setdefault(name, [])
                    for element in w.elements:
                        head = element.parts[0] if element.parts and isinstance(element.parts[0], _Lit) else None
                        key, sep, _ = (head.text if head else "").lstrip("+~").partition("=")
                        if sep and _OVERRIDE_KEY.match(key):
                            self.maybe_set.setdefault(key, element.line)
                    self.notes.append(f"line {w.line}: '{name}' is set in a block that is not evaluated; the "
                                      "arguments it may hold are not read")
                else:
                    self.expander.env[name] = f"${name}"
                    self.expander.taint[name] = {f"{name} (line {w.line})"}

    def _test(self, words: _Command) -> bool | None:
        """Evaluate ``[ a = b ]``, ``[ $x -eq 4 ]``, ``[ -z "$x" ]``; None when undecidable."""
        args: list[str] = []
        for w in words:
            if w.kind != "word":
                return None
            expanded = self.expander.fields(w.parts, w.line)
            if any(deps for _, deps in expanded):
                return None
            args.extend(text for text, _ in expanded)
        if len(args) < 2 or (args[0], args[-1]) not in (("[", "]"), ("[[", "]]")):
            return None
        args = args[1:-1]
        negate = bool(args) and args[0] == "!"
        args = args[1:] if negate else args
        result: bool | None = None
        if len(args) == 3 and args[1] in ("=", "==", "!="):
            result = (args[0] == args[2]) == (args[1] != "!=")
        elif len(args) == 3 and args[1] in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
            try:
                x, y = int(args[0]), int(args[2])
            except ValueError:
                return None
            result = {"-eq": x == y, "-ne": x != y, "-lt": x < y, "-le": x <= y, "-gt": x > y,
                      "-ge": x >= y}[args[1]]
        elif len(args) == 2 and args[0] in ("-z", "-n"):
            result = (args[1] == "") == (args[0] == "-z")
        elif len(args) == 1:
            result = args[0] != ""
        if result is None:
            return None
        return result != negate

    @staticmethod
    def _assignment(word: _Token) -> tuple[str, bool, list[_Part]] | None:
        head = word.parts[0] if word.kind == "word" and word.parts else None
        if not isinstance(head, _Lit) or head.quoted or not (m := _ASSIGNMENT.match(head.text)):
            return None
        rest: list[_Part] = [_Lit(head.text[m.end() :], False), *word.parts[1:]]
        return m.group(1), m.group(2) == "+=", rest

    def _simple(self, tokens: _Command) -> None:
        words: list[_Token] = []
        skip_target = False
        for tok in tokens:
            if skip_target:
                skip_target = False
            elif tok.kind == "redir":
                skip_target = tok.has_target
            elif tok.kind == "word":
                words.append(tok)
        k = 0
        assignments: list[tuple[str, bool, list[_Part]]] = []
        while k < len(words) and (assignment := self._assignment(words[k])):
            assignments.append(assignment)
            k += 1
        if k == len(words):  # an assignment-only line sets shell variables
            for w, (name, append, parts) in zip(words, assignments, strict=True):
                if w.elements is not None:
                    self.expander.assign_array(name, w.elements, append)
                else:
                    self.expander.assign(name, parts, w.line, append)
            return
        head = words[k].raw()
        if head == "exit":
            self.exited = True
            return
        if head in _DECLARE:
            for w in words[k + 1 :]:
                if assignment := self._assignment(w):
                    self.expander.assign(assignment[0], assignment[2], w.line, assignment[1])
        elif head == "unset":
            for w in words[k + 1 :]:
                self.expander.env.pop(w.raw(), None)
                self.expander.taint.pop(w.raw(), None)
        else:
            self._maybe_verl(words[k:])

    def _maybe_verl(self, words: list[_Token]) -> None:
        argv: list[str] = []
        origin: list[tuple[int, set[str]]] = []  # per argument: script line, undefined names
        for w in words:
            for text, deps in self.expander.fields(w.parts, w.line):
                argv.append(text)
                origin.append((w.line, deps))
        found = _find_entry(argv, str(Path(self.path).parent))
        if found is None:
            return
        start, module = found
        cmd = LaunchCommand(entry_point=module, argv=argv, overrides=[], override_lines=[],
                            config_name=None, config_path=None, line=words[0].line, unresolved={})
        if self.command is not None and (self.command.is_rl or not cmd.is_rl):
            self.notes.append(f"line {words[0].line}: a second verl command is ignored "
                              f"(the one on line {self.command.line} is used)")
            return
        if self.command is not None:  # an RL run after a generation or evaluation step: check the RL run
            self.notes.append(f"line {self.command.line}: {self.command.entry_point} is not RL training; "
                              f"the RL run on line {cmd.line} is checked")
        i = start
        while i < len(argv):
            arg, (line, unresolved) = argv[i], origin[i]
            option, _, inline = arg.partition("=")
            if option in ("--config-name", "-cn", "--config-path", "-cp", "--config-dir", "-cd"):
                value = inline if inline else (argv[i + 1] if i + 1 < len(argv) else "")
                i += 1 if inline else 2
                if option in ("--config-name", "-cn"):
                    cmd.config_name = value
                elif option in ("--config-path", "-cp"):
                    cmd.config_path = value
                else:
                    cmd.notes.append(f"line {line}: '{option}' is not modelled; its configs are not read")
                continue
            if arg.startswith("-"):
                cmd.notes.append(f"line {line}: option '{arg}' passed to verl is not modelled")
            else:
                key = arg.split("=", 1)[0].lstrip("+~")
                for name in sorted(unresolved):
                    cmd.unresolved.setdefault(name, []).append(key)
                cmd.overrides.append(arg)
                cmd.override_lines.append(line)
            i += 1
        self.command = cmd


def parse_launch_script(text: str, path: str = "<script>", variables: Mapping[str, str] | None = None
                        ) -> LaunchCommand:
    """Find the verl command in a launch script and return its Hydra overrides.

    ``variables``: what the environment the script is launched from holds (``DEVICE=gpu bash run.sh``), as the
    user passes it (``--set-var``); the advisor never reads its own environment into a script.

    Raises:
        ConfigError: the script cannot be read or holds no verl command.
    """
    if "\x00" in text:
        raise ConfigError("is binary, not a launch script", path=path)
    interp = _Interpreter(path, variables)
    try:
        interp.run(_split_commands(_Lexer(text, path).tokens()))
    except RecursionError as err:
        raise ConfigError("is nested too deeply to read", path=path) from err
    if interp.command is None:
        from ._other_tools import other_tool_script

        if (other := other_tool_script(text, path)) is not None:
            raise other
        raise ConfigError("no verl command found", path=path,
                          suggestion="expected 'python3 -m verl.trainer.main_ppo ...' or a recipe entry point")
    entry = interp.command.entry
    module = interp.command.entry_point
    if entry is None and (siblings := recipe_folder_entry_points(module)):
        raise ConfigError(f"runs {module}, which recipe {module.split('.')[1]} does not have; Python stops with "
                          "'No module named ...'", path=path, where=interp.command.line,
                          suggestion=f"its entry points: {', '.join(siblings)}")
    if entry is not None and not entry.is_rl:
        raise ConfigError(
            f"runs {entry.module} ({_NON_RL.get(entry.kind, entry.kind)}; {entry.hydra_main}), not RL training",
            path=path, where=interp.command.line,
            suggestion="the advisor checks RL training runs: 'python3 -m verl.trainer.main_ppo ...' or a "
                       "recipe's RL entry point")
    interp.command.notes[:0] = interp.notes
    interp.command.maybe_set = dict(interp.maybe_set)
    interp.command.undecided = dict(interp.undecided)
    interp.command.variables = dict(variables or {})
    return interp.command


