"""The one compiled part of logbus: the record walker of the broker's record validation
(src/logbus/records/_validate.c). Everything else is in pyproject.toml; `pip install -e .`
builds it (a C compiler and Python's headers are needed). Run from a source tree without
it (PYTHONPATH=src), logbus.records.validation falls back to its numpy path."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "logbus.records._validate",
            ["src/logbus/records/_validate.c"],
            extra_compile_args=["-O2"],
        )
    ]
)
