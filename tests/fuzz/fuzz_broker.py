"""The broker under fuzz and what is checked after every case.

`FuzzedBroker` runs `logbus server start` as a subprocess on 127.0.0.1 with its log in a
file. After every case `Fuzzer.run` checks, and records as a failure of that case:
- the broker log has no new traceback and no ERROR/CRITICAL line;
- the request was answered (its response decodes, under its correlation id) or the
  connection closed, within `HANG_BOUND_S` (plus any wait the request itself asked for);
- a fresh connection still gets an ApiVersions answer within the same bound;
- the broker's peak RSS (VmHWM in /proc/<pid>/status) stays under `RSS_BOUND_KB`;
- every batch appended to any segment file since the last case decodes fully with the
  reference decoder (`logbus.records.reader.decode_batch`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from logbus.protocol import ApiKey, codec
from logbus.protocol.errors import ProtocolError, UnsupportedVersion
from logbus.records.batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader
from logbus.records.reader import decode_batch
from ports import free_port

HANG_BOUND_S = float(os.environ.get("LOGBUS_FUZZ_HANG_S", "10"))
RSS_BOUND_KB = int(os.environ.get("LOGBUS_FUZZ_RSS_MB", "512")) * 1024
# A broker past this is killed at once (the failure is reported all the same): an
# unbounded one would otherwise take the memory of every process on the machine.
RSS_KILL_KB = 2 * RSS_BOUND_KB
FOLLOW_UP_CID = 0x5A5A5A5A
# at most this many failing cases are collected before a family stops
MAX_FAILURES = int(os.environ.get("LOGBUS_FUZZ_MAX_FAILURES", "5"))

_PROBLEM_LINE = re.compile(r"Traceback|\] (ERROR|CRITICAL) ")
_API_VERSIONS_V0 = codec.encode_request(
    codec.RequestHeader(ApiKey.API_VERSIONS, 0, FOLLOW_UP_CID, "fuzz-follow-up"), {}
)


class FuzzedBroker:
    """One `logbus server start` subprocess; `stop()` always leaves no process behind."""

    def __init__(self, workdir: Path, **overrides: str) -> None:
        self.data_dir = workdir / "data"
        self.log_path = workdir / "broker.log"
        self.port = free_port()
        self.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
            "group.initial.rebalance.delay.ms": "0",
            **overrides,
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_pos = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> FuzzedBroker:
        args = [sys.executable, "-m", "logbus.cli.main", "server", "start"]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=log)
        threading.Thread(target=self._watch_memory, args=(self.proc,), daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("broker did not start listening")

    def _watch_memory(self, proc: subprocess.Popen[bytes]) -> None:
        while proc.poll() is None:
            rss = _status_kb(proc.pid, "VmRSS")
            if rss > RSS_KILL_KB:
                with open(self.log_path, "a") as log:
                    log.write(f"[fuzz] ERROR broker killed by the fuzz suite: RSS {rss} kB\n")
                proc.kill()
                return
            time.sleep(0.1)

    def stop(self) -> int | None:
        """Stop the broker (SIGTERM, then SIGKILL after 10 s); its exit code."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.terminate()
            try:
                return proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
                return None
        return proc.returncode

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def new_log_problems(self) -> list[str]:
        """Tracebacks and ERROR lines logged since the last call, with what follows them."""
        with open(self.log_path, "rb") as f:
            f.seek(self._log_pos)
            chunk = f.read()
        # only whole lines: a traceback being written is read whole next time
        end = chunk.rfind(b"\n") + 1
        self._log_pos += end
        lines = chunk[:end].decode("utf-8", "replace").splitlines()
        for i, line in enumerate(lines):
            if _PROBLEM_LINE.search(line):
                return ["\n".join(lines[i : i + 40])]
        return []

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text("utf-8", "replace").splitlines()[-n:])
        except OSError:
            return ""

    def peak_rss_kb(self) -> int:
        return 0 if self.proc is None else _status_kb(self.proc.pid, "VmHWM")

    def responsive(self) -> str | None:
        """None if a fresh connection gets an ApiVersions answer in time, else why not."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=HANG_BOUND_S) as s:
                s.sendall(_API_VERSIONS_V0)
                frames, closed = read_frames(s, time.monotonic() + HANG_BOUND_S)
        except OSError as exc:
            return f"a fresh connection failed: {exc!r}"
        if not frames:
            return "a fresh ApiVersions request got " + ("a close" if closed else "no answer")
        return None


def _status_kb(pid: int, field: str) -> int:
    """A memory figure of /proc/<pid>/status, 0 once the process is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    match = re.search(field + r":\s+(\d+) kB", status)
    return int(match.group(1)) if match else 0


def read_frames(sock: socket.socket, deadline: float) -> tuple[list[bytes], bool]:
    """Response frames until the follow-up's answer, a close, or the deadline:
    (frames, closed)."""
    buf = bytearray()
    frames: list[bytes] = []
    while True:
        while len(buf) >= 4:
            (size,) = struct.unpack_from(">i", buf)
            if len(buf) < 4 + size:
                break
            frame = bytes(buf[4 : 4 + size])
            del buf[: 4 + size]
            frames.append(frame)
            if frame[:4] == struct.pack(">i", FOLLOW_UP_CID):
                return frames, False
        left = deadline - time.monotonic()
        if left <= 0:
            return frames, False
        sock.settimeout(left)
        try:
            got = sock.recv(65536)
        except TimeoutError:
            return frames, False
        except OSError:
            return frames, True
        if not got:
            return frames, True
        buf += got


@dataclass
class Case:
    """One mutated request; `seed`, `family`, `api_key`, `version` and `round` replay it."""

    seed: int
    family: str
    api_key: int
    version: int
    round: int
    description: str
    frame: bytes
    budget: str = "small"

    def __str__(self) -> str:
        try:
            name = ApiKey(self.api_key).name
        except ValueError:
            name = f"API {self.api_key}"
        hexed = self.frame[:600].hex() + ("..." if len(self.frame) > 600 else "")
        return (
            f"family {self.family}, {name} v{self.version} round {self.round}: "
            f"{self.description}\n  replay: LOGBUS_FUZZ_SEED={self.seed} "
            f"LOGBUS_FUZZ_ONLY={self.api_key}/{self.version}/{self.round} pytest tests/fuzz "
            + ("-m fuzz_large " if self.budget != "small" else "")
            + f"-k '{self.family} and {self.budget}'\n  frame ({len(self.frame)} bytes): {hexed}"
        )


def asked_wait_s(frame: bytes) -> float:
    """How long the request itself asks the broker to wait (a long poll is no hang)."""
    try:
        header, body = codec.decode_request(frame[4:])
    except (ProtocolError, UnsupportedVersion):
        return 0.0
    if header.api_key == ApiKey.FETCH:
        return max(body["max_wait_ms"], 0) / 1000
    if header.api_key == ApiKey.JOIN_GROUP:
        return max(body["rebalance_timeout_ms"], body["session_timeout_ms"], 0) / 1000
    return 0.0


def decoder_problem(frame: bytes) -> str | None:
    """The project's request decoder must refuse bad bytes with ProtocolError, nothing
    else (the broker closes the connection on ProtocolError and logs anything else)."""
    try:
        codec.decode_request(frame[4:])
    except (ProtocolError, UnsupportedVersion):
        pass
    except Exception as exc:
        return f"decode_request raised {type(exc).__name__}: {exc}"
    return None


def response_problem(request: bytes, frames: list[bytes]) -> str | None:
    """The first frame answers the request (unless it has none): decodable, same id."""
    if not frames or frames[0][:4] == struct.pack(">i", FOLLOW_UP_CID):
        return None
    api_key, version, correlation_id = codec.peek_request_header(request[4:])
    if api_key == ApiKey.API_VERSIONS and not 0 <= version <= 4:
        version = 0
    try:
        got, _body = codec.decode_response(api_key, version, frames[0])
    except Exception as exc:
        return f"undecodable response: {type(exc).__name__}: {exc}; {frames[0][:200].hex()}"
    if got != correlation_id:
        return f"response carries correlation id {got}, the request {correlation_id}"
    return None


class StoreAudit:
    """Reads every batch appended to any segment file of the data dir since the last call
    and decodes it fully with the reference decoder."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.checked: dict[Path, int] = {}

    def new_problems(self) -> list[str]:
        problems = []
        for path in sorted(self.data_dir.glob("*/*.log")):
            start = self.checked.get(path, 0)
            try:
                with open(path, "rb") as f:
                    f.seek(start)
                    data = f.read()
            except OSError:
                continue
            done, found = audit_batches(data, start, path)
            self.checked[path] = start + done
            problems += found
        return problems

    def all_problems(self) -> list[str]:
        self.checked.clear()
        return self.new_problems()


def audit_batches(data: bytes, start: int, path: Path) -> tuple[int, list[str]]:
    """(bytes of whole batches read, problems) for the batches in `data`."""
    view = memoryview(data)
    pos = 0
    problems = []
    while len(data) - pos >= LOG_OVERHEAD:
        base_offset, length = struct.unpack_from(">qi", data, pos)
        if length < HEADER_SIZE - LOG_OVERHEAD:
            problems.append(f"{path.parent.name}/{path.name} @{start + pos}: batchLength {length}")
            return len(data), problems
        end = pos + LOG_OVERHEAD + length
        if end > len(data):
            break  # the rest is being written
        where = f"{path.parent.name}/{path.name} @{start + pos} (offset {base_offset})"
        try:
            header, records = decode_batch(view[pos:end])
        except Exception as exc:
            problems.append(f"{where}: stored batch unreadable: {type(exc).__name__}: {exc}")
        else:
            problem = offsets_problem(header, [r.offset for r in records])
            if problem:
                problems.append(f"{where}: {problem}")
        pos = end
    return pos, problems


def offsets_problem(header: BatchHeader, offsets: list[int]) -> str | None:
    """Record offsets must rise strictly inside [baseOffset, baseOffset + lastOffsetDelta]
    (a cleaned batch may have gaps, never disorder or records past its last offset)."""
    if not offsets:
        return None
    rising = all(a < b for a, b in itertools.pairwise(offsets))
    if not rising or offsets[0] < header.base_offset or offsets[-1] > header.last_offset:
        return (f"record offsets {offsets[:5]}... outside or out of order in "
                f"[{header.base_offset}, {header.last_offset}]")
    return None


@dataclass
class Fuzzer:
    """Sends cases to one broker and collects the failing ones."""

    broker: FuzzedBroker
    failures: list[str] = field(default_factory=list)
    cases: int = 0
    peak_rss_kb: int = 0

    def __post_init__(self) -> None:
        self.audit = StoreAudit(self.broker.data_dir)
        self.broker.new_log_problems()
        self.audit.new_problems()

    @property
    def done(self) -> bool:
        return len(self.failures) >= MAX_FAILURES or not self.broker.alive()

    def run(self, case: Case, *, expect_answer: bool = False) -> list[str]:
        """Send one case and check everything; return its problems (also recorded)."""
        self.cases += 1
        problems = []
        problem = decoder_problem(case.frame)
        if problem:
            problems.append(problem)
        wait = asked_wait_s(case.frame)
        parked = wait > HANG_BOUND_S
        deadline = time.monotonic() + HANG_BOUND_S + (0 if parked else wait)
        try:
            with socket.create_connection(("127.0.0.1", self.broker.port), HANG_BOUND_S) as s:
                # closed on us half-way: what it answered is still read
                with contextlib.suppress(OSError):
                    s.sendall(case.frame + _API_VERSIONS_V0)
                frames, closed = read_frames(s, deadline)
        except OSError as exc:
            frames, closed = [], True
            problems.append(f"could not connect: {exc!r}")
        answered = any(f[:4] == struct.pack(">i", FOLLOW_UP_CID) for f in frames)
        if not (answered or closed or parked):
            problems.append(
                f"hang: neither answered nor closed within {HANG_BOUND_S + wait:.0f} s"
            )
        if expect_answer and (closed or not frames or not answered):
            problems.append("a valid request was not answered")
        problem = response_problem(case.frame, frames)
        if problem:
            problems.append(problem)
        problems += self.broker_problems()
        if problems:
            self.failures.append(f"{case}\n  " + "\n  ".join(problems))
        return problems

    def broker_problems(self) -> list[str]:
        problems = self.broker.new_log_problems()
        if not self.broker.alive():
            problems.append(f"the broker exited:\n{self.broker.log_tail()}")
            return problems
        problem = self.broker.responsive()
        if problem:
            problems.append(problem)
        rss = self.broker.peak_rss_kb()
        self.peak_rss_kb = max(self.peak_rss_kb, rss)
        if rss > RSS_BOUND_KB:
            problems.append(f"broker peak RSS {rss} kB over the bound {RSS_BOUND_KB} kB")
        problems += self.audit.new_problems()
        return problems

    def report(self) -> str:
        return (
            f"{len(self.failures)} failing case(s) in {self.cases} "
            f"(peak RSS {self.peak_rss_kb} kB):\n\n" + "\n\n".join(self.failures)
        )

    def finish(self, extra: list[str] | None = None) -> None:
        """Stop the broker (its shutdown must be clean too), then fail with every failing
        case found, if any."""
        problems = list(extra or [])
        problems += [f"full audit: {p}" for p in self.audit.all_problems()[:10]]
        code = self.broker.stop()
        problems += self.broker.new_log_problems()
        if code not in (0, None) and not self.failures:
            problems.append(f"the broker exited with {code}")
        if problems:
            self.failures.append("after the run:\n  " + "\n  ".join(problems))
        assert not self.failures, self.report()

