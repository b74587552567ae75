"""Layouts as a sweep axis in the results table and the report (serial, synthetic tables): the
kernel and end-to-end columns, old tables read as native, the report's end-to-end section, and
native-only reports left as they were."""

from __future__ import annotations

import json

import pytest
from layout_tables import layout_rows, write_rows

from bench.cli import main
from bench.record import COLUMNS, read_frame, row_from_result

FACTS = {"host": "h", "cores": 2, "mpi_library": "MPICH", "git_commit": "abc", "launcher": "x"}
POINT = {"key": "k", "algo": "cannon", "P": 4, "M": 64, "K": 64, "N": 64, "layouts_in": "block"}


def _row(result: dict) -> dict:
    return row_from_result(dict(POINT), "done", 0, json.dumps(result), "", 1.0, "", FACTS)


def test_a_record_from_block_layouts_fills_the_end_to_end_columns():
    row = _row(
        {
            "seconds": 0.3,
            "multiply_seconds": 0.2,
            "verified": True,
            "samples": [0.3, 0.31],
            "multiply_samples": [0.2, 0.21],
            "phases": {
                "redistribute_in": {"seconds": 0.07, "bytes_sent_per_rank": [10, 40, 0, 5]},
                "multiply": {"seconds": 0.2, "bytes_sent_per_rank": [99, 99, 99, 99]},
                "redistribute_out": {"seconds": 0.03, "bytes_sent_per_rank": [0, 1, 30, 5]},
            },
            "layout_label": "A=cols,B=cols,C=block",
            "relabel": {
                "enabled": True,
                "ranks": [1, 0, 2, 3],
                "bytes_before": 900,
                "bytes_after": 500,
                "bytes_saved": 400,
            },  # fmt: skip
            "predicted_seconds": 0.28,
            "predicted_multiply_seconds": 0.19,
        }
    )
    assert row["status"] == "ok" and row["layouts_in"] == "A=cols,B=cols,C=block"
    assert row["seconds"] == 0.3 and row["multiply_seconds"] == 0.2
    assert row["redistribute_in_seconds"] == 0.07 and row["redistribute_out_seconds"] == 0.03
    assert row["redistribute_bytes_per_rank_max"] == 41  # rank 1: 40 in + 1 out (not 99)
    assert row["relabel_bytes_saved"] == 400 and row["predicted_multiply_seconds"] == 0.19
    assert {"layouts_in", "multiply_seconds", "relabel_bytes_saved"} <= set(COLUMNS)


def test_a_record_from_before_layouts_is_native_and_all_kernel():
    row = _row({"seconds": 0.2, "verified": True, "predicted_seconds": 0.25})
    assert row["layouts_in"] == "native" and row["multiply_seconds"] == 0.2
    assert row["redistribute_in_seconds"] == 0 and row["redistribute_bytes_per_rank_max"] == 0
    assert row["relabel_bytes_saved"] == 0 and row["predicted_multiply_seconds"] == 0.25


def test_an_old_table_reads_as_native_kernels(tmp_path):
    old = [c for c in COLUMNS if c not in ("layouts_in", "multiply_seconds",
                                             "predicted_multiply_seconds",
                                             "redistribute_in_seconds")]  # fmt: skip
    path = tmp_path / "old.csv"
    write_rows(path, layout_rows({"native": 0.0}), old)
    df = read_frame(path)
    assert set(df["layouts_in"]) == {"native"}
    assert (df["multiply_seconds"] == df["seconds"]).all()
    assert (df["predicted_multiply_seconds"] == df["predicted_seconds"]).all()
    assert (df["redistribute_in_seconds"] == 0).all()
    # a non-native row without a kernel time stays unknown, not the end-to-end time
    rows = layout_rows({"block": 0.5})
    for r in rows:
        r["multiply_seconds"] = ""
    write_rows(path, rows)
    assert read_frame(path)["multiply_seconds"].isna().all()


def _report(tmp_path, rows, name="lay"):
    table = tmp_path / f"{name}.csv"
    write_rows(table, rows)
    out = tmp_path / f"{name}-report"
    assert main(["report", str(table), "-o", str(out)]) == 0
    return out, (out / "report.md").read_text()


def test_report_sets_kernel_and_end_to_end_side_by_side(tmp_path, capsys):
    out, md = _report(tmp_path, layout_rows())
    for name in (
        "end_to_end_512x512x512_float32.png",
        "phases_512x512x512_float32.png",
        "strong_512x512x512_float32_block.png",
        "strong_512x512x512_float32_native.png",
    ):
        assert (out / name).stat().st_size > 1000, name
    assert "## Kernel and end to end" in md
    assert "| kernel [s]" in md and "| end to end [s]" in md and "end to end / kernel" in md
    # cannon from cols at P=4: kernel 0.08/4^0.8, end to end 2.1x
    line = next(ln for ln in md.splitlines() if ln.startswith("| cannon") and "| cols" in ln
                and "| 4 " in ln and "2.10" in ln)  # fmt: skip
    assert "0.02639" in line and "0.05542" in line
    # readings: end to end per layouts, and where the winner changes
    assert "end to end / kernel: median" in md and "From **cols** layouts" in md
    assert "differ at 2 of 6 points" in md and "P=4 cols: cannon -> summa" in md
    fastest = [
        ln
        for ln in md.splitlines()
        if ln.startswith("| 512x512x512 | float32 | 4 ") and "Mann-Whitney" in ln
    ]
    assert {ln.split("|")[4].strip(): ln.split("|")[5].strip() for ln in fastest} == {
        "block": "**cannon**",
        "cols": "**summa**",
        "native": "**cannon**",
    }
    # the multiplication's bytes are drawn once per algorithm and P, not once per layouts
    assert md.count("](comm_512x512x512_float32.png)") == 1


def test_report_of_native_runs_has_no_end_to_end_parts(tmp_path, capsys):
    _, md = _report(tmp_path, layout_rows({"native": 0.0}))
    assert "Kernel and end to end" not in md and "end to end" not in md
    assert "| layouts" not in md and "| time [s]" in md


@pytest.mark.parametrize("layouts", [{"native": 0.0, "block": 0.4}, {"block": 0.4}])
def test_phase_bars_without_prediction_and_one_layout(tmp_path, capsys, layouts):
    rows = layout_rows(layouts, Ps=(4,))
    for r in rows:
        r["predicted_seconds"] = r["predicted_multiply_seconds"] = ""
    out, md = _report(tmp_path, rows)
    assert (out / "phases_512x512x512_float32.png").exists()
    assert not (out / "end_to_end_512x512x512_float32.png").exists()  # one P: no line plot
    assert "| block" in md


def test_layout_names_become_file_names():
    from bench.figures import slug

    assert slug("A=cols,B=cols,C=block") == "A-cols-B-cols-C-block"
    assert slug("((4_r, 8), (2_c, 16))@r=4,c=2") == "4-r-8-2-c-16-r-4-c-2"
