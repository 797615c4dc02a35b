"""Reading YAML the user wrote, within bounds: one line naming the file and the line for anything else.

PyYAML composes nested collections recursively (a line of 2,000 ``[`` is a RecursionError), shares a node
between its aliases (nine levels of nine aliases, 342 bytes, expand to 387 million values when anything walks
the result: "billion laughs"), lets an alias name its own anchor (a list that holds itself) and raises bare
ValueErrors from its constructors (``!!float x``, an integer past Python's 4,300-digit limit). This loader
refuses each of these as the input's problem, before anything downstream walks the data.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

import yaml

from advisor.errors import AdvisorError, ConfigError

from ._limits import MAX_BYTES

MAX_DEPTH = 64  # verl's deepest default key has 6 levels; a list of dicts of lists adds a few
MAX_NODES = 1_000_000  # values after every alias is expanded


class _Limit(yaml.MarkedYAMLError):
    """The input passes one of the bounds above."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem=problem, problem_mark=mark)


def _bounded_loader() -> type:
    from omegaconf._utils import get_yaml_loader  # Hydra's YAML dialect (1e-6 is a float, no implicit timestamps)

    # omegaconf builds its loader class in a function (no static type): mypy rejects a base it cannot see
    class BoundedLoader(get_yaml_loader()):  # type: ignore[misc]
        _depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    raise _Limit(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def get_single_node(self) -> Any:
            node = super().get_single_node()
            if node is not None:
                _check_expansion(node)
            return node

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            try:
                value = super().construct_object(node, deep=deep)
            except yaml.YAMLError:
                raise
            except (ValueError, TypeError, AttributeError, OverflowError) as err:  # !!float x, 5,000 digits
                tag = node.tag.rsplit(":", 1)[-1]
                digits = sum(c.isdigit() for c in node.value) if isinstance(node.value, str) else 0
                problem = (f"an integer of {digits:,} digits; Python (and so verl) reads at most 4,300"
                           if tag == "int" and digits > 4300 else f"{_short(node.value)} is not a valid !!{tag}")
                raise _Limit(problem, node.start_mark) from err
            if isinstance(value, (datetime.date, set)):
                kind = "timestamp" if isinstance(value, datetime.date) else "set"
                raise _Limit(f"a !!{kind} value, which OmegaConf (and so verl) cannot hold; quote it as a string",
                             node.start_mark)
            return value

    return BoundedLoader


def _short(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else type(value).__name__
    return text if len(text) <= 40 else f"{text[:30]}...' ({len(value)} characters)"


def _check_expansion(root: Any) -> None:
    """Count the values the node graph expands to (aliases counted each time) and refuse a graph holding itself."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        children = _children(node)
        if done:
            on_path.discard(id(node))
            size[id(node)] = 1 + sum(size[id(c)] for c in children)
            if size[id(node)] > MAX_NODES:
                raise _Limit(f"expands to more than {MAX_NODES:,} values (aliases repeat their anchor's values)",
                             node.start_mark)
            continue
        if id(node) in size:
            continue
        on_path.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise _Limit("an alias refers to a collection that holds it (a self-reference)", child.start_mark)
            if id(child) not in size:
                stack.append((child, False))


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


_LOADER: type | None = None
_FAST: type | None = None
_FAST_FROM = 64 * 1024  # characters: below this the pure-Python parser is as fast as any (verl's configs)
_INDENT = re.compile(r"^[ \t?:-]*", re.M)


def _shallow(text: str) -> bool:
    """Whether ``text`` cannot nest deeper than MAX_DEPTH, by a bound read without parsing: at most MAX_DEPTH
    ``[``/``{`` in the whole text (flow nesting), and no line indented (with ``-``, ``?`` and ``:`` of compact
    nesting counted) past MAX_DEPTH (block nesting). libyaml's composer recurses in C with no depth bound of its
    own, so only such a text goes to it."""
    if text.count("[") + text.count("{") > MAX_DEPTH:
        return False
    return max((len(m) for m in _INDENT.findall(text)), default=0) <= MAX_DEPTH


def _fast_loader(bounded: type) -> type:
    """``bounded`` with libyaml's scanner, parser and composer (10x faster on a wide file); the same resolvers,
    constructors and expansion bound. Without libyaml: ``bounded`` itself."""
    global _FAST
    if _FAST is None:
        try:
            from yaml.cyaml import CParser
        except ImportError:  # PyYAML built without libyaml
            CParser = None
        if CParser is None:
            _FAST = bounded
        else:
            class FastBoundedLoader(CParser, bounded):
                def __init__(self, stream: Any) -> None:
                    CParser.__init__(self, stream)
                    yaml.constructor.SafeConstructor.__init__(self)
                    yaml.resolver.Resolver.__init__(self)

                def get_single_node(self) -> Any:
                    node = CParser.get_single_node(self)
                    if node is not None:
                        _check_expansion(node)
                    return node

            _FAST = FastBoundedLoader
    return _FAST
_SURROGATE_ESCAPE = re.compile(r"\\[uU][dD][89a-fA-F][0-9a-fA-F]{2}")


def _fix_text(text: str) -> str:
    """A surrogate pair -> its character; a lone surrogate -> U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _join_surrogates(data: Any, depth: int = 0) -> Any:
    if isinstance(data, str):
        return _fix_text(data)
    if depth > MAX_DEPTH:
        return data
    if isinstance(data, dict):
        return {_join_surrogates(k, depth + 1): _join_surrogates(v, depth + 1) for k, v in data.items()}
    if isinstance(data, list):
        return [_join_surrogates(v, depth + 1) for v in data]
    return data


def load_yaml(text: str, *, path: str, error: type[AdvisorError] = ConfigError) -> Any:
    """The data of a YAML document, or ``error`` (one line: the file, the line, the problem)."""
    return load_yaml_with_lines(text, path=path, error=error)[0]


def load_yaml_with_lines(text: str, *, path: str, error: type[AdvisorError] = ConfigError
                         ) -> tuple[Any, dict[str, int]]:
    """The data of a YAML document and the line (1-based) of each dotted mapping key in it
    (``actor_rollout_ref.actor.optim.lr`` -> 14), from the marks PyYAML keeps on every node."""
    global _LOADER
    if len(text) > MAX_BYTES:
        raise error(f"is {len(text) / 2**20:.0f} MiB; a verl config is far smaller (the limit is "
                    f"{MAX_BYTES // 2**20} MiB)", path=path)
    if _LOADER is None:
        _LOADER = _bounded_loader()
    loader = _fast_loader(_LOADER) if len(text) > _FAST_FROM and _shallow(text) else _LOADER
    try:
        parser = loader(text)
        try:
            node = parser.get_single_node()
            data = parser.construct_document(node) if node is not None else None
        finally:
            parser.dispose()
        lines: dict[str, int] = {}
        _key_lines(node, "", lines)
        # YAML's "\\ud83d\\ude00" (as JSON writes an emoji) is two lone surrogates, which no UTF-8 output can print
        return (_join_surrogates(data) if _SURROGATE_ESCAPE.search(text) else data), lines
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or "syntax error"
        message = problem if isinstance(err, _Limit) else f"malformed YAML ({problem})"
        raise error(message, path=path, where=(mark.line + 1) if mark else None) from err
    except RecursionError as err:  # a parser path the depth bound does not cover
        raise error(f"nested deeper than {MAX_DEPTH} levels", path=path) from err


def _key_lines(node: Any, prefix: str, out: dict[str, int]) -> None:
    """Record the line of each mapping key under ``node`` as a dotted path (a key set twice: the last, which wins)."""
    stack = [(node, prefix)]
    while stack:
        current, at = stack.pop()
        if not isinstance(current, yaml.MappingNode):
            continue
        for key_node, value_node in current.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            path = f"{at}{key_node.value}"
            out[path] = max(out.get(path, 0), key_node.start_mark.line + 1)
            stack.append((value_node, path + "."))
