"""The one compiled part of logbus: the record walker of the broker's record validation
(src/logbus/records/_validate.c). Everything else is in pyproject.toml; `pip install -e .`
builds it when a C compiler and Python's headers are there (Debian: gcc, python3-dev).
Where they are not, the install still succeeds (the extension is optional) and
logbus.records.validation uses its numpy path, as it does from a source tree run with
PYTHONPATH=src; `python setup.py build_ext --inplace` builds it into such a tree."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "logbus.records._validate",
            ["src/logbus/records/_validate.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
