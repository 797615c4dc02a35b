"""The stdio wire of ``advisor mcp``: every line a client sends is screened before the MCP library sees it.

The library drops a line it cannot validate without answering, so a client that sent a request with an ``id``
would wait forever. Here a line that is not a valid JSON-RPC message is answered with a JSON-RPC error
(https://www.jsonrpc.org/specification#error_object) carrying its ``id`` when one can be read: a batch (MCP
does not take batches since protocol 2025-06-18), a request without ``"jsonrpc": "2.0"``, ``params`` that are
not an object, a lone surrogate (no UTF-8 can carry it back), an object nested deeper than any message, a line
over the size cap, bytes that are not UTF-8. A malformed notification (no ``id``) gets no answer, as JSON-RPC
says.
"""

from __future__ import annotations

import io
import json
import os
import re
import threading
from collections.abc import Iterator
from typing import Any, BinaryIO, cast

MAX_LINE = 16 << 20  # bytes of one message: a tool call is a few hundred
MAX_DEPTH = 64  # nesting of one message: MCP's deepest is a tool's input schema, well under this
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS, UNFINISHED = -32700, -32600, -32602, -32603  # -32603: internal error
_ID_AT = re.compile(r'"id"\s*:\s*(-?\d{1,18}(?![\d.eE])|"(?:[^"\\]|\\.){0,200}"|null)')


SERVER_ENV = "ADVISOR_MCP_SERVER"
"""environment variable holding this server's random token: every process a tool starts (a verify trial, in its
own session) inherits it, so the server can stop them all when it exits"""


def stop_marked(token: str) -> int:
    """SIGKILL every process of this user whose environment holds ``ADVISOR_MCP_SERVER=token`` (Linux); how many."""
    import signal

    needle = f"{SERVER_ENV}={token}".encode()
    count = 0
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit() and int(e) != os.getpid()]
    except OSError:
        return 0
    for entry in entries:
        try:
            with open(f"/proc/{entry}/environ", "rb") as fp:
                environ = fp.read(1 << 20).split(b"\0")
        except OSError:
            continue
        if needle in environ:
            try:
                os.kill(int(entry), signal.SIGKILL)
                count += 1
            except OSError:
                pass
    return count


def claim_stdio() -> tuple[BinaryIO, BinaryIO]:
    """The wire (private copies of fds 0 and 1); fd 0 then reads /dev/null and fd 1 writes to stderr, so what a
    tool or a library prints never lands among the messages."""
    wire_in = os.fdopen(os.dup(0), "rb", buffering=0)
    wire_out = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out


def _outside_strings(text: str) -> Iterator[tuple[int, str]]:
    """Each character of ``text`` outside JSON strings, with its index (a string's opening quote included, its
    content and closing quote not)."""
    in_string = escaped = False
    for i, c in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
            continue
        if c == '"':
            in_string = True
        yield i, c


def _depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` outside strings."""
    depth = deepest = 0
    for _, c in _outside_strings(text):
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def _top_level_id(text: str) -> Any:
    """The ``id`` of a message that cannot be parsed whole (nested too deep): the first ``"id": value`` at the
    top level of the object, else None."""
    depth = 0
    for i, c in _outside_strings(text):
        if c == '"':
            if depth == 1:
                m = _ID_AT.match(text, i)
                if m:
                    return json.loads(m.group(1))
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
    return None


def _id_of(message: Any) -> Any:
    value = message.get("id") if isinstance(message, dict) else None
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def error(message_id: Any, code: int, text: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": message_id, "error": {"code": code, "message": text}})


def _one(message: Any, validate: Any) -> str | None:
    """The error answer to one decoded message, or None when it is a valid JSON-RPC message."""
    if not isinstance(message, dict):
        return error(None, INVALID_REQUEST, "a message is a JSON object")
    message_id = _id_of(message)
    has_id = "id" in message
    if "method" in message and message.get("jsonrpc") != "2.0":
        return error(message_id, INVALID_REQUEST, 'a request needs "jsonrpc": "2.0"') if has_id else ""
    if "params" in message and not isinstance(message["params"], dict):
        return error(message_id, INVALID_PARAMS, "params must be an object (MCP takes no positional params)") \
            if has_id else ""
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return error(message_id, INVALID_PARAMS, "a string holds a lone surrogate (\\ud800-\\udfff)") if has_id else ""
    try:
        validate(message)
    except Exception as err:  # pydantic's ValidationError: the first line names the field
        first = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        return error(message_id, INVALID_REQUEST, f"not a valid MCP message: {first}") if has_id else ""
    return None


def screen(raw: bytes, validate: Any = lambda message: None) -> tuple[str | None, list[str]]:
    """(the line to pass on, or None; the error answers to write) for one line a client sent."""
    if len(raw) > MAX_LINE:
        return None, [error(None, INVALID_REQUEST, f"a message is at most {MAX_LINE >> 20} MiB")]
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None, [error(None, PARSE_ERROR, "not UTF-8")]
    if not text:
        return None, []
    if _depth(text) > MAX_DEPTH:
        message_id = _top_level_id(text) if text.startswith("{") else None
        return None, [error(message_id if isinstance(message_id, (str, int)) else None, INVALID_REQUEST,
                            f"nested deeper than {MAX_DEPTH} levels")]
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return None, [error(None, PARSE_ERROR, "not JSON")]
    if isinstance(message, list):  # a batch: answer each request in it
        answers = [error(_id_of(m), INVALID_REQUEST, "batches are not supported (MCP 2025-06-18 removed them)")
                   for m in message if isinstance(m, dict) and "id" in m]
        return None, answers or [error(None, INVALID_REQUEST, "batches are not supported")]
    answer = _one(message, validate)
    if answer is None:
        return text, []
    return None, [answer] if answer else []


def read_lines(wire_in: BinaryIO) -> Iterator[bytes]:
    """The wire's lines, each cut at MAX_LINE + 1 bytes (the rest of an over-long line is skipped)."""
    # a BinaryIO is a raw stream to BufferedReader (typeshed asks for RawIOBase)
    reader = io.BufferedReader(cast(io.RawIOBase, wire_in), buffer_size=1 << 16) \
        if not isinstance(wire_in, io.BufferedReader) else wire_in
    while True:
        line = reader.readline(MAX_LINE + 1)
        if not line:
            return
        if len(line) > MAX_LINE and not line.endswith(b"\n"):
            while True:  # skip to the end of the over-long line
                rest = reader.readline(1 << 20)
                if not rest or rest.endswith(b"\n"):
                    break
        yield line


def _key(message_id: Any) -> str:
    return json.dumps(message_id)  # 1 and "1" are two ids


class Ledger:
    """The client's requests read and not yet answered, so that end of input answers them before the exit, and
    how many times the client said its roots changed."""

    def __init__(self) -> None:
        self._pending: dict[str, Any] = {}
        self.roots_changed = 0

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def unanswered(self) -> list[Any]:
        return list(self._pending.values())

    def read(self, text: str) -> None:
        """A screened line passed on to the library (a valid JSON-RPC message)."""
        message = json.loads(text)
        method = message.get("method")
        if method is None:
            return  # the client's answer to a request of the server (roots/list)
        if "id" in message:
            self._pending[_key(message["id"])] = message["id"]
        elif method == "notifications/roots/list_changed":
            self.roots_changed += 1
        elif method == "notifications/cancelled":  # the library sends no answer to a cancelled request
            params = message.get("params") or {}
            self._pending.pop(_key(params.get("requestId")), None)

    def written(self, text: str) -> None:
        """A line the server wrote: an answer (``result`` or ``error``, no ``method``) settles its request."""
        if '"method"' in text[:200] and '"result"' not in text and '"error"' not in text:
            return  # a request or notification of the server's own
        try:
            message = json.loads(text)
        except ValueError:
            return
        if isinstance(message, dict) and "method" not in message and "id" in message:
            self._pending.pop(_key(message["id"]), None)


class Wire:
    """The client's side of stdout: whole lines, one writer at a time; a broken pipe sets ``closed``."""

    def __init__(self, out: BinaryIO, closed: Any, ledger: Ledger | None = None) -> None:
        import anyio

        self._out = out
        self._lock = anyio.Lock()
        self._closed = closed
        self._ledger = ledger or Ledger()
        self.broken = False

    async def write(self, text: str) -> None:
        import anyio

        data = (text if text.endswith("\n") else text + "\n").encode("utf-8", errors="replace")
        async with self._lock:
            try:
                await anyio.to_thread.run_sync(self._write, data)
            except OSError:
                self.broken = True  # no answer can reach the client any more
                self._closed.set()
                return
        self._ledger.written(text)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[self._out.write(view) or 0:]
        self._out.flush()

    async def flush(self) -> None:
        pass


class Screened:
    """The lines a client sent, screened (:func:`screen`): what the MCP library reads as its stdin. Closing
    stdin sets ``closed``."""

    def __init__(self, wire_in: BinaryIO, wire: Wire, closed: Any, ledger: Ledger | None = None) -> None:
        import mcp_types as types

        self._lines = read_lines(wire_in)
        self._wire = wire
        self._closed = closed
        self._ledger = ledger or Ledger()
        self._validate = lambda message: types.jsonrpc_message_adapter.validate_python(message, by_name=False)
        self._lock = threading.Lock()

    def _next(self) -> bytes | None:
        with self._lock:
            return next(self._lines, None)

    def __aiter__(self) -> Screened:
        return self

    async def __anext__(self) -> str:
        import anyio

        while True:
            raw = await anyio.to_thread.run_sync(self._next, abandon_on_cancel=True)
            if raw is None:
                self._closed.set()
                # end of input reaches the library only once every request read is answered: the library
                # stops on it, dropping what it has not handled yet (the server bounds the wait: GRACE_S)
                while self._ledger.pending and not self._wire.broken:
                    await anyio.sleep(0.02)
                raise StopAsyncIteration
            line, answers = screen(raw, self._validate)
            for answer in answers:
                await self._wire.write(answer)
            if line is not None:
                self._ledger.read(line)
                return line + "\n"
