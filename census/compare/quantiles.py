"""Quantiles of Student's t and of the normal distribution, made without scipy: the 95% interval
of a diff's step time (census.compare.diff) and of an A/B experiment's arms
(census.compare.ab.stats), and the one-sided tests of equivalence. Below both, so that the A/B
statistics (compare/ab/) stay a stage above the diff.
"""

from __future__ import annotations

Z_975 = 1.959963984540054
Z_95 = 1.6448536269514722
Z_80 = 0.8416212335729143  # 80% power
_T_975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004,
          2.262157, 2.228139, 2.200985, 2.178813, 2.160369, 2.144787, 2.13145, 2.119905,
          2.109816, 2.100922, 2.093024, 2.085963, 2.079614, 2.073873, 2.068658, 2.063899,
          2.059539, 2.055529, 2.051831, 2.048407, 2.04523, 2.042272)  # fmt: skip
_T_95 = (6.313752, 2.919986, 2.353363, 2.131847, 2.015048, 1.94318, 1.894579, 1.859548,
         1.833113, 1.812461, 1.795885, 1.782288, 1.770933, 1.76131, 1.75305, 1.745884,
         1.739607, 1.734064, 1.729133, 1.724718, 1.720743, 1.717144, 1.713872, 1.710882,
         1.708141, 1.705618, 1.703288, 1.701131, 1.699127, 1.697261)  # fmt: skip


def t_975(df: int) -> float:
    """The 97.5% quantile of Student's t with `df` degrees of freedom (a table to 30, then the
    Cornish-Fisher expansion, within 1e-4 of the exact value)."""
    return _t_quantile(df, _T_975, Z_975)


def t_95(df: int) -> float:
    """The 95% quantile of Student's t with `df` degrees of freedom (the one-sided tests of
    equivalence), made as t_975 is: a table to 30, then the expansion (within 1e-4)."""
    return _t_quantile(df, _T_95, Z_95)


def _t_quantile(df: int, table: tuple[float, ...], z: float) -> float:
    if df < 1:
        raise ValueError("df must be 1 or more")
    if df <= len(table):
        return table[df - 1]
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df * df)
