"""Kernel names at 80 columns keep what tells them apart (issue #59): the function's name, then
the template arguments where kernels of one name differ; parameter lists go first
(`GammaBetaBackwardCU…, T1 *, T1 *)` told nothing)."""

from __future__ import annotations

import re

import pytest

from census.api import census_view, diff_view, summarize
from census.compare.diff import diff_census
from census.compare.explain import explain_diff
from census.render.diff_table import render_diff_table
from census.render.fit import compact, simplify
from census.render.table import render_summary
from tests.helpers.files import fixture_file
from tests.helpers.terminal import cells, terminal_tables

PAIRS = [
    ("h200_eager_3steps.sqlite", "h200_compiled_3steps.sqlite"),
    ("nsysai_mfu_2gpu_before.sqlite", "nsysai_mfu_2gpu_after.sqlite"),
]
WINDOW = 8  # what a cut name keeps beside its function's name: the part where it differs


def base(name: str) -> str:
    """The kernel's function name: its simplified name up to its template arguments or
    parameters (`GammaBetaBackwardCUDAKernelTemplate`)."""
    return re.match(r"[^<(]*", simplify(name))[0]


def name_column(text: str, title: str) -> tuple[list[str], int]:
    """The names shown in the first table after the line `title` starts, and their column's
    width."""
    after = text.split(title, 1)[1]
    rows = [ln for ln in terminal_tables(after)[0] if ln.startswith("│")]
    return [cells(ln)[0] for ln in rows], len(rows[0].split("│")[1]) - 2


def check(names: list[str], shown: list[str], width: int) -> None:
    assert len(shown) == len(names) and width < 80
    for i in range(len(names)):
        for j in range(i):
            assert (names[i] == names[j]) == (shown[i] == shown[j]), (shown[i], names[i])
        own = base(names[i])
        if len(own) + WINDOW <= width:
            assert shown[i].startswith(own), (shown[i], own)
        else:  # a function name too long to keep whole beside a difference: its start
            assert shown[i].startswith(own[:6]), (shown[i], own)


@pytest.mark.parametrize("pair", PAIRS)
def test_kernel_names_at_80_columns_keep_their_function_and_what_tells_them_apart(
    pair: tuple[str, str],
) -> None:
    a, b = (summarize(fixture_file(name)) for name in pair)
    for c in (a, b):
        text = render_summary(census_view(c), top=len(c.kernels), width=80)
        shown, width = name_column(text, "Top ")
        check([k.name for k in c.kernels], shown, width)
    d = diff_census(a, b)
    text = render_diff_table(diff_view(d, explanation=explain_diff(d)), top=100, width=80)
    shown, width = name_column(text, "kernel changes")
    check([k.name for k in d.kernels if k.bucket != "unchanged"][:100], shown, width)


def test_the_parameters_go_first_and_the_function_name_stays() -> None:
    gamma = (
        "void at::native::<unnamed>::GammaBetaBackwardCUDAKernelTemplate<float, float, "
        "(unsigned int)32, (unsigned int)32, (unsigned int)256, (bool)0, (bool)1, (bool)0>(long,"
        " long, const T1 *, const T1 *, const T2 *, const T2 *, T1 *, T1 *)"
    )
    assert compact(simplify(gamma)) == (
        "GammaBetaBackwardCUDAKernelTemplate<float, float, 32, 32, 256, 0, 1, 0>"
    )
    copy = (
        "void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl_"
        "nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() "
        "(instance 3)]::operator ()() const::[lambda() (instance 12)]::operator ()() const::"
        "[lambda(c10::BFloat16) (instance 1)]>(at::TensorIteratorBase &, const T1 &)::[lambda(int)"
        " (instance 1)]>(int, T3)"
    )
    assert compact(simplify(copy)) == (
        "elementwise_kernel<128, 4, gpu_kernel_impl_nocast<direct_copy_kernel_cuda::"
        "lambda(BFloat16)>::lambda>"
    )
