"""The controller event thread: one worker, events in order, results and failures handed
to whoever waits, nothing left hanging at stop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from logbus.controller.controller_events import ControllerEventManager


def test_events_run_in_order_on_one_thread() -> None:
    events = ControllerEventManager()
    events.start()
    seen: list[tuple[int, str]] = []
    try:
        for i in range(50):
            events.put(lambda i=i: seen.append((i, threading.current_thread().name)))
        assert events.submit(lambda: "done").result(10) == "done"
    finally:
        events.stop()
    assert [i for i, _ in seen] == list(range(50))
    assert {name for _, name in seen} == {"controller-event-thread"}


def test_a_failure_reaches_the_waiter_and_the_thread_goes_on() -> None:
    events = ControllerEventManager()
    events.start()
    try:
        with pytest.raises(ZeroDivisionError):
            events.submit(lambda: 1 // 0).result(10)
        events.put(lambda: 1 // 0)  # logged, not fatal
        assert events.submit(lambda: 2).result(10) == 2
    finally:
        events.stop()


def test_awaited_from_an_event_loop() -> None:
    events = ControllerEventManager()
    events.start()
    try:
        assert asyncio.run(events.call(lambda: threading.current_thread().name)) == (
            "controller-event-thread"
        )
    finally:
        events.stop()


def test_after_stop_nothing_hangs() -> None:
    events = ControllerEventManager()
    events.start()
    gate = threading.Event()
    events.put(gate.wait)
    events.stop(timeout=0.2)  # the worker is still blocked in gate.wait
    late = events.submit(lambda: 1)
    with pytest.raises(RuntimeError, match="shut down"):
        late.result(1)
    gate.set()
    events._thread.join(10)
    assert not events._thread.is_alive()
