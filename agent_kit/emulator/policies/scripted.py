"""The ``scripted:path/file.py:NAME`` policy: user code answers every turn.

NAME is a class (instantiated once, with no arguments) or a callable; it is called as
``policy(request: PolicyRequest)`` and returns a ``PolicyReply``, a ``str`` (text answer) or a
dict (see :func:`~agent_kit.emulator.schemas.coerce_reply`); ``async def`` works too. A sync
policy is called off the event loop, one call at a time (:class:`ScriptedBackend`). Load
problems are :class:`~agent_kit.errors.UsageError`; failures while answering are
:class:`~agent_kit.errors.ScriptedPolicyError`, except JobRuntimeError subclasses
the
policy raises on purpose (to simulate throttling, say), which pass through.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_kit.emulator.loader import load_module, module_name_for
from agent_kit.emulator.policies.base import PolicyResult, result_for_reply
from agent_kit.emulator.schemas import PolicyRequest, coerce_reply
from agent_kit.errors import JobRuntimeError, PolicyError, ScriptedPolicyError, UsageError
from agent_kit.settings import DEFAULTS, Settings

__all__ = ["ScriptedBackend", "from_spec", "load_scripted"]


def _user_frame(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {path.name}:{last.lineno} in {last.name})"


class ScriptedBackend:
    """Calls user code for every turn: ``target(request)``, sync or async.

    A sync target runs off the event loop, in a daemon thread of its own per call, so one that
    blocks (``time.sleep``, a slow computation, a hang) cannot freeze the loop: the rollout
    timeout still fires and Ctrl-C / SIGTERM still stop the run, and a call abandoned that way
    never keeps the process from exiting. Calls run one at a time in the order they came (a
    class keeping state sees them as it did on the loop); a call abandoned by its caller (timed
    out, cancelled) lets the next one start. An ``async def`` target runs on the loop.
    """

    def __init__(
        self,
        target: Callable[[PolicyRequest], Any],
        *,
        name: str,
        path: Path,
        tokenizer: str = DEFAULTS.tokenizer,
    ) -> None:
        self.name = name
        self._target = target
        self._path = path
        #: The token counter of its usage (``AGENT_KIT_TOKENIZER``).
        self.tokenizer = tokenizer
        method = None if inspect.isroutine(target) else type(target).__call__  # an instance's
        self._sync = not (
            inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(method)
        )
        self._turns: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def _one_at_a_time(self) -> asyncio.Lock:
        """The lock that serializes the sync calls on the running loop."""
        loop = asyncio.get_running_loop()
        if self._turns is None or self._turns[0] is not loop:
            self._turns = (loop, asyncio.Lock())
        return self._turns[1]

    async def _call(self, request: PolicyRequest) -> Any:
        """The target's value for ``request``: a sync target's in a thread (class docstring)."""
        if not self._sync:
            return self._target(request)
        async with self._one_at_a_time():
            return await _in_thread(self._target, request, f"agent-kit {self.name}")

    async def complete(self, request: PolicyRequest) -> PolicyResult:
        """Call the target and coerce its value; user failures become ScriptedPolicyError."""
        try:
            value = await self._call(request)
            if inspect.isawaitable(value):
                value = await value
        except (JobRuntimeError, PolicyError):
            raise
        except Exception as exc:
            raise ScriptedPolicyError(
                f"scripted policy {self.name} raised {type(exc).__name__}: {exc}"
                f"{_user_frame(exc, self._path)}"
            ) from exc
        try:
            reply = coerce_reply(value)
        except (TypeError, ValueError) as exc:
            raise ScriptedPolicyError(
                f"scripted policy {self.name} returned an unusable value: {exc}"
            ) from exc
        return result_for_reply(request, reply, tokenizer=self.tokenizer)

    async def aclose(self) -> None:
        """Nothing to release."""


async def _in_thread(function: Callable[[Any], Any], argument: Any, name: str) -> Any:
    """``function(argument)`` in a daemon thread (with this context's variables); its value or
    exception is handed to the loop. Cancelled, the wait ends at once and the thread's outcome
    is dropped when it comes (the loop may be gone by then)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = context.run(function, argument)
        except Exception as exc:  # noqa: BLE001 - handed to the loop, raised there
            error = exc
        except BaseException as exc:  # noqa: BLE001 - a SystemExit fails the turn, not the thread
            error = RuntimeError(f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await future


def _module_name(path: Path) -> str:
    return module_name_for(path, prefix="agent_kit_scripted")


def load_scripted(
    rest: str, *, base_dir: Path | None = None, tokenizer: str = DEFAULTS.tokenizer
) -> ScriptedBackend:
    """Load ``path/file.py:NAME`` (relative to ``base_dir`` or the CWD); UsageError if unusable.

    The file is imported under a unique module name (registered in ``sys.modules``); its
    directory is put on ``sys.path`` (:mod:`agent_kit.emulator.loader`) so it can import sibling
    modules.
    """
    file_part, sep, attr = rest.rpartition(":")
    if not sep or not file_part or not attr.isidentifier():
        raise UsageError(
            f"bad scripted policy spec 'scripted:{rest}': expected scripted:path/to/file.py:NAME"
        )
    path = Path(file_part).expanduser()
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    path = path.resolve()
    if not path.is_file():
        raise UsageError(f"scripted policy file not found: {path}")
    module = load_module(path, name=_module_name(path), what="scripted policy file")
    module_name = module.__name__
    if not hasattr(module, attr):
        defined = sorted(
            n
            for n, v in vars(module).items()
            if callable(v) and not n.startswith("_") and getattr(v, "__module__", "") == module_name
        )
        raise UsageError(
            f"{path.name} defines no '{attr}'"
            + (f"; callables it defines: {', '.join(defined)}" if defined else "")
        )
    target = getattr(module, attr)
    if inspect.isclass(target):
        try:
            target = target()
        except Exception as exc:
            raise UsageError(
                f"could not instantiate scripted policy {attr}() from {path.name}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    if not callable(target):
        raise UsageError(
            f"scripted policy {attr} in {path.name} is not callable (it is a "
            f"{type(target).__name__}); define a function or a class with __call__"
        )
    try:
        inspect.signature(target).bind(None)
    except TypeError as exc:
        raise UsageError(
            f"scripted policy {attr} in {path.name} must accept one argument "
            f"(the PolicyRequest): {exc}"
        ) from exc
    except ValueError:  # builtins without a signature: trust them
        pass
    return ScriptedBackend(
        target, name=f"scripted:{file_part}:{attr}", path=path, tokenizer=tokenizer
    )


def from_spec(
    rest: str, *, seed: int, base_dir: Path | None = None, settings: Settings = DEFAULTS
) -> ScriptedBackend:
    """The ``scripted:`` scheme (see :mod:`agent_kit.emulator.policies.registry`)."""
    return load_scripted(rest, base_dir=base_dir, tokenizer=settings.tokenizer)
