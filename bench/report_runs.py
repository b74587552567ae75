"""The report's last section: every run of the table, failed ones too, one row each; with the
layouts and the kernel's time beside the end-to-end one where the table has layouts."""

from __future__ import annotations

from .report_sections import Report, _fmt, _mib
from .report_stats import has_layouts


def all_runs(r: Report) -> None:
    layouts = has_layouts(r.df)
    r.doc.h(2, "All runs")
    r.doc.table(
        ["algorithm", "P", "shape", "dtype"]
        + (["layouts"] if layouts else [])
        + ["status"]
        + (["kernel [s]", "end to end [s]"] if layouts else ["time [s]"])
        + ["GFLOP/s", "predicted [s]", "sent [MiB]", "peak mem [MiB]", "verified"],
        [
            [x["algo"], int(x["P"]), x["shape"], x["dtype"]]
            + ([x["layouts_in"]] if layouts else [])
            + [x["status"]]
            + ([_fmt(x["multiply_seconds"])] if layouts else [])
            + [
                _fmt(x["seconds"]),
                _fmt(x["gflops"], 3),
                _fmt(x["predicted_seconds"]),
                _mib(x["bytes_sent"]),
                _mib(x.get("peak_memory_bytes")),
                x.get("verified", ""),
            ]
            for _, x in r.df.sort_values(["algo", "shape", "P", "layouts_in"]).iterrows()
        ],
    )
