"""The per-host limit, counted on every hop of a request.

A source's request holds one slot of the host it is talking to; when a redirect leads
to another host, the slot is given back and one of the new host's is taken. Eight
sources on eight hosts that all redirect to one host therefore never put more than
``per_host`` requests in flight there. A request holds at most one host slot at a time,
so two requests redirecting towards each other's hosts cannot wait on each other. Nor
does a redirected request wait for a host's slot while it holds what a request takes
after its host slot (the run's slot, room for its body: :class:`HeldBesides`): a
source of that host holding the slot may be waiting for exactly that. It gives them
back, waits, and takes them again in the order a new request does.

With a :class:`SlotGate` the limit holds across processes too: after the in-process
slot, a request takes one of the gate's slots for its host (shared by every worker on
the database), asking again every :data:`GATE_POLL_SECONDS` while all are taken.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, TypeVar

from signal_feeds.offload import in_thread

__all__ = ["GATE_POLL_SECONDS", "HeldBesides", "HostHold", "HostSlots", "HostSlotsHeld",
           "SlotGate"]

T = TypeVar("T")

#: How long a request waits before asking a full gate again (stretched by up to half,
#: at random, so that waiting workers do not ask in step).
GATE_POLL_SECONDS = 0.05


class HostSlotsHeld(Exception):
    """Every slot of a host stayed held by other workers past the longest wait: a
    worker that is stopped (``kill -STOP``), hung or cut off keeps its slots for as long
    as its connection or file lock lives. The request is not made."""

    def __init__(self, host: str, waited: float) -> None:
        super().__init__(f"not requested: every slot of {host} has been held by other "
                         f"workers for {waited:.0f} s (a stopped or hung worker, or more "
                         "of its sources than per_host lets the workers fetch in time)")
        self.host = host
        self.waited = waited


class SlotGate(Protocol):
    """Host slots shared with other processes (the store's host gate): ``take`` never
    waits and returns a slot number or ``None``; both calls may block briefly, and
    ``give_back`` never raises. With ``instant`` true they never wait on I/O (a lock on
    a local file) and are called on the event loop; otherwise on a thread. A request
    that waits for a slot stands in the host's line while it does (``join_line``,
    ``leave_line``) and asks ``in_line``: a first ask gets no slot while another
    process has a request in line, so that slots go round the workers rather than
    staying with the one that holds them (see the store's ``HostGate``)."""

    instant: bool

    def take(self, host: str, per_host: int, *, in_line: bool = False) -> int | None: ...

    def give_back(self, host: str, slot: int) -> None: ...

    def join_line(self, host: str) -> None: ...

    def leave_line(self, host: str) -> None: ...


class HeldBesides(Protocol):
    """What a request holds besides its host slot, taken after it: given back while a
    redirect waits for another host's slot, then taken again."""

    @property
    def held(self) -> bool: ...

    def give_back(self) -> None: ...

    async def take(self) -> None: ...


class HostSlots:
    """``per_host`` slots for each host name (lower-cased; the port is not part of it)."""

    def __init__(self, per_host: int, *, gate: SlotGate | None = None,
                 max_gate_wait: float | None = None,
                 refusal: Callable[[str], BaseException | None] | None = None) -> None:
        self.per_host = per_host
        self.gate = gate
        #: What a request to a host is refused with, if anything (a pause the host
        #: asked for): asked on every hop, redirects included.
        self.refusal = refusal
        #: Seconds a request waits for a slot of the gate before it gives up
        #: (:class:`HostSlotsHeld`); ``None``: no limit.
        self.max_gate_wait = max_gate_wait
        self._hosts: dict[str, asyncio.Semaphore] = {}

    def _semaphore(self, host: str) -> asyncio.Semaphore:
        semaphore = self._hosts.get(host)
        if semaphore is None:
            semaphore = self._hosts[host] = asyncio.Semaphore(self.per_host)
        return semaphore

    def hold(self, host: str, *, besides: HeldBesides | None = None) -> HostHold:
        """``async with slots.hold(host) as hold:`` waits for a slot of ``host``;
        :meth:`HostHold.move_to` trades it for another host's, giving ``besides`` back
        while it waits."""
        return HostHold(self, host.lower(), besides)


class HostHold:
    """The one host slot a request holds (see :class:`HostSlots`)."""

    def __init__(self, slots: HostSlots, host: str, besides: HeldBesides | None = None
                 ) -> None:
        self._slots = slots
        self._host = host
        self._besides = besides
        self._held: asyncio.Semaphore | None = None
        self._gate_slot: int | None = None

    @property
    def host(self) -> str:
        """The host whose slot is held (or wanted)."""
        return self._host

    async def __aenter__(self) -> HostHold:
        await self.move_to(self._host)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._release()

    async def move_to(self, host: str) -> float:
        """Hold a slot of ``host`` (lower-cased), giving back the one held for another.
        Returns the seconds spent taking back what was given back meanwhile (queued
        behind other sources, as a new request is): a wait the deadline should not
        count, since a request never counts the wait for its first slots."""
        host = host.lower()
        if self._held is not None and host == self._host:
            return 0.0
        await self._release()
        gave_back = False
        try:
            semaphore = self._slots._semaphore(host)
            if semaphore.locked():
                gave_back = self._give_back_besides()
            await semaphore.acquire()
            self._held, self._host = semaphore, host
            # Asked once the slot is held: a request that waited for it behind one that
            # was refused is refused too (and again after the gate's wait, below).
            self._refuse_if_asked(host)
            gate = self._slots.gate
            if gate is not None:
                slot = await _take(gate, host, self._slots.per_host)
                if slot is None:
                    gave_back = self._give_back_besides() or gave_back
                    slot = await self._wait_for_gate(gate, host)
                self._gate_slot = slot
                self._refuse_if_asked(host)
        except BaseException:
            await self._release()
            raise
        if not gave_back:
            return 0.0
        assert self._besides is not None
        began = asyncio.get_running_loop().time()
        await self._besides.take()  # with the host slot held, as a new request
        return asyncio.get_running_loop().time() - began

    def _give_back_besides(self) -> bool:
        if self._besides is None or not self._besides.held:
            return False
        self._besides.give_back()
        return True

    async def _wait_for_gate(self, gate: SlotGate, host: str) -> int:
        loop = asyncio.get_running_loop()
        began, most = loop.time(), self._slots.max_gate_wait
        await _join_line(gate, host)
        try:
            while True:
                if most is not None and loop.time() - began > most:
                    raise HostSlotsHeld(host, loop.time() - began)
                await asyncio.sleep(GATE_POLL_SECONDS * (1 + random.random() / 2))
                if (slot := await _take(gate, host, self._slots.per_host,
                                        in_line=True)) is not None:
                    return slot
        finally:  # (a cancelled wait for the thread still leaves the line)
            await _on_gate(gate, functools.partial(gate.leave_line, host))

    def _refuse_if_asked(self, host: str) -> None:
        if self._slots.refusal is not None and (
                refused := self._slots.refusal(host)) is not None:
            raise refused

    async def _release(self) -> None:
        gate, slot = self._slots.gate, self._gate_slot
        try:
            if gate is not None and slot is not None:
                self._gate_slot = None
                await _on_gate(gate, functools.partial(gate.give_back, self._host, slot))
        finally:
            # Whatever the gate did, this process's slot is free again: a leaked one
            # would leave every later request to the host waiting for ever.
            if self._held is not None:
                self._held.release()
                self._held = None


async def _on_gate(gate: SlotGate, call: Callable[[], T],
                   undo: Callable[[T], None] | None = None) -> T:
    """``call()`` on the event loop if the gate is instant, else on a thread; what a call
    on the thread did after the caller was cancelled is undone by ``undo`` (a slot taken
    is given back, a place in line left), never lost."""
    if gate.instant:  # two thread hops per request were a tenth of a warm run's CPU
        return call()
    doing = asyncio.ensure_future(in_thread(call))

    def undo_late(done: asyncio.Future[T]) -> None:
        if undo is not None and not done.cancelled() and done.exception() is None:
            undo(done.result())

    try:
        return await asyncio.shield(doing)
    except asyncio.CancelledError:
        doing.add_done_callback(undo_late)
        raise


async def _join_line(gate: SlotGate, host: str) -> None:
    """``gate.join_line``; a line joined after the caller was cancelled is left again."""
    await _on_gate(gate, functools.partial(gate.join_line, host),
                   lambda _: gate.leave_line(host))


async def _take(gate: SlotGate, host: str, per_host: int, *,
                in_line: bool = False) -> int | None:
    """``gate.take``; a slot it takes after the caller was cancelled is given back."""

    def give_back(slot: int | None) -> None:
        if slot is not None:
            gate.give_back(host, slot)

    return await _on_gate(gate, functools.partial(gate.take, host, per_host,
                                                  in_line=in_line), give_back)
