"""CPU cost of the record decoders, in one process, no sockets: the reference decoder
(`records.reader.decode_batch`), the consumer's list columns
(`records.reader.decode_record_columns`), the Spark reader's Arrow columns
(`records.columnar.decode_columns`, four batches a call as from one fetch), the validator's
numpy walker (`records.validation.check_records(compiled=False)`, used when the C
extension is not built) and `records.builder.build_batch`, in us per batch.

    python -m bench.decode_bench [--rounds 7] [--against REV] [--only consumer,spark]

Batches: 1 KiB values 1,000 to a batch and 100 B values 2,000 to a batch (about what
librdkafka sends in P1: batch.size 1 MB, linger.ms 5), keyed (12-byte keys) and keyless,
uncompressed and zstd; timestamps spread over 5 ms as a linger leaves them. A last case
has irregular records (values of 50 to 150 bytes, keys of 0 to 20, some headers): the
paths for records that no run holds. Values are P1's (half random, half text).

With `--against REV`, REV's `logbus.records` is loaded beside the working tree's (under
another name; the compiled validator is the working tree's) and every case is timed old
and new in turn, `--rounds` times, the order swapped each round: the machine's load falls
on both alike. Each figure is the best of its rounds of this process's CPU time (load
only ever adds).
"""

from __future__ import annotations

import argparse
import importlib
import io
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from bench.load_kafka import make_values

BASE_TIME = 1_700_000_000_000
_PACKAGE = "logbus.records"
_AGAINST = "_records_against"
FUNCTIONS = ("reference", "consumer", "spark", "validator", "build")


class Case(NamedTuple):
    name: str
    value_size: int
    count: int
    keyed: bool
    codec: str
    irregular: bool = False


CASES = [
    Case(f"{size_name} {'keyed' if keyed else 'keyless'} {codec}", size, count, keyed, codec)
    for size_name, size, count in (("1 KiB", 1024, 1000), ("100 B", 100, 2000))
    for keyed in (False, True)
    for codec in ("none", "zstd")
] + [Case("irregular none", 100, 2000, True, "none", irregular=True)]


def load_against(rev: str, root: Path, into: Path) -> ModuleType:
    """REV's `logbus.records`, importable as `_records_against`."""
    archive = subprocess.run(
        ["git", "archive", rev, "src/logbus/records"], cwd=root, check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    package = into / _AGAINST
    (into / "src/logbus/records").rename(package)
    for source in package.glob("*.py"):
        source.write_text(source.read_text().replace(_PACKAGE, _AGAINST))
    for built in (root / "src/logbus/records").glob("_validate*.so"):
        shutil.copy(built, package)
    sys.path.insert(0, str(into))
    return importlib.import_module(_AGAINST)


def modules(package: str) -> dict[str, ModuleType]:
    names = ("batch", "builder", "columnar", "compression", "reader", "validation")
    return {name: importlib.import_module(f"{package}.{name}") for name in names}


def records_of(case: Case, first: int) -> list[tuple[Any, ...]]:
    rnd = random.Random(case.count + first)
    values = make_values(case.value_size, 64)
    out = []
    for i in range(case.count):
        value = values[i % len(values)]
        key = b"user-%07d" % rnd.randrange(10**7) if case.keyed else None
        headers: tuple[tuple[str, bytes], ...] = ()
        if case.irregular:
            value = value[: rnd.randrange(50, 151)]
            key = key[: rnd.randrange(0, 21)] if key else None
            if i % 97 == 0:
                headers = (("trace", b"%d" % i),)
        out.append((key, value, headers, BASE_TIME + 5 * i // case.count))
    return out


class Prepared(NamedTuple):
    calls: dict[str, Callable[[], object]]


def prepare(mods: dict[str, ModuleType], case: Case) -> Prepared:
    """The calls to time for `case`, made with the modules `mods`."""
    builder, batch_mod, reader = mods["builder"], mods["batch"], mods["reader"]
    compression = mods["compression"].CompressionType.from_name(case.codec)
    records = [builder.NewRecord(*fields) for fields in records_of(case, 0)]
    raws = []
    for n in range(4):
        raws.append(builder.build_batch(
            [builder.NewRecord(*fields) for fields in records_of(case, n)],
            base_offset=n * case.count, compression=compression,
        ))
    raw = raws[0]
    header = batch_mod.BatchHeader.parse(raw)
    fetched = [(batch, batch_mod.BatchHeader.parse(batch)) for batch in raws]
    section = reader._batch_data(memoryview(raw), header)
    check = mods["validation"].check_records
    decode_columns = mods["columnar"].decode_columns
    return Prepared({
        "reference": lambda: reader.decode_batch(raw),
        "consumer": lambda: reader.decode_record_columns(raw, header),
        "spark": lambda: decode_columns(fetched),
        "validator": lambda: check(section, header, compiled=False),
        "build": lambda: builder.build_batch(records, compression=compression),
    })


def best_us(call: Callable[[], object], number: int) -> float:
    # CPU time of this process: the other processes on the machine take wall-clock time,
    # not this process's CPU time (they still share its caches).
    return min(timeit.repeat(call, number=number, repeat=3, timer=time.process_time)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--against", help="a git revision to time against the working tree")
    parser.add_argument("--only", help="comma-separated functions: " + ", ".join(FUNCTIONS))
    parser.add_argument("--cases", help="comma-separated substrings of the case names")
    args = parser.parse_args()
    functions = args.only.split(",") if args.only else list(FUNCTIONS)
    cases = [c for c in CASES
             if not args.cases or any(part in c.name for part in args.cases.split(","))]
    root = Path(__file__).resolve().parent.parent
    sides = {"new": modules(_PACKAGE)}
    with tempfile.TemporaryDirectory() as scratch:
        if args.against:
            load_against(args.against, root, Path(scratch))
            sides = {"old": modules(_AGAINST), **sides}
        prepared = {(side, case): prepare(mods, case)
                    for side, mods in sides.items() for case in cases}
        numbers = {}
        for case in cases:
            for function in functions:
                once = best_us(prepared["new", case].calls[function], 1)
                numbers[case, function] = max(1, int(20_000 / max(once, 1.0)))
        best: dict[tuple[str, Case, str], float] = {}
        order = list(sides)
        for round_ in range(args.rounds):
            for case in cases:
                for function in functions:
                    for side in order if round_ % 2 == 0 else order[::-1]:
                        took = best_us(prepared[side, case].calls[function],
                                       numbers[case, function])
                        key = (side, case, function)
                        best[key] = min(best.get(key, took), took)
            print(f"round {round_ + 1} of {args.rounds} done", file=sys.stderr)
    head = "| case | function | " + " | ".join(f"{side} us" for side in sides)
    print(head + (" | new/old |" if len(sides) == 2 else " |"))
    print("|" + " --- |" * (len(sides) + 2 + (len(sides) == 2)))
    for case in cases:
        for function in functions:
            figures = [best[side, case, function] for side in sides]
            row = f"| {case.name} | {function} | " + " | ".join(f"{f:.1f}" for f in figures)
            if len(figures) == 2:
                row += f" | {figures[1] / figures[0]:.3f}"
            print(row + " |")


if __name__ == "__main__":
    main()
