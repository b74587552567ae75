"""Synthetic results tables with runs from several layouts (no MPI), for the report, compare
and record tests: kernel times, redistribution phases and bytes as distmm run records them."""

from __future__ import annotations

import csv
import json

from bench.record import COLUMNS

LAYOUTS = {"native": 0.0, "block": 0.4, "cols": 1.1}  # redistribution / kernel


def layout_rows(layouts=LAYOUTS, algos=(("cannon", 1.0), ("summa", 1.3)), Ps=(1, 4, 16)):
    rows = []
    for algo, speed in algos:
        for P in Ps:
            for name, extra in layouts.items():
                kernel = 0.08 * speed / P**0.8
                move = 0.0 if P == 1 else kernel * extra
                # summa's kernel is slower, but it redistributes cols for less
                if algo == "summa" and name == "cols":
                    move /= 4
                total = kernel + move
                rows.append(
                    {
                        "key": f"{algo}{P}{name}",
                        "status": "ok",
                        "sweep": "lay",
                        "scaling": "strong",
                        "algo": algo,
                        "P": P,
                        "M": 512,
                        "K": 512,
                        "N": 512,
                        "dtype": "float32",
                        "seconds": total,
                        "seconds_min": total * 0.95,
                        "seconds_max": total * 1.05,
                        "samples": json.dumps([total * f for f in (0.97, 0.99, 1.0, 1.01, 1.03)]),
                        "gflops": 2 * 512**3 / total / 1e9,
                        "bytes_sent": 0 if P == 1 else 2**20 * P,
                        "bytes_sent_per_rank_max": 0 if P == 1 else 2**20 / P**0.5,
                        "predicted_seconds": total * 0.9,
                        "predicted_multiply_seconds": kernel * 0.9,
                        "layouts": json.dumps({"A": "((1:512), (512:1))"}),
                        "layouts_in": name,
                        "multiply_seconds": kernel,
                        "redistribute_in_seconds": move * 0.7,
                        "redistribute_out_seconds": move * 0.3,
                        "redistribute_bytes_per_rank_max": 0 if name == "native" else 2**19,
                        "relabel_bytes_saved": 1024 if name == "block" else 0,
                        "host": "h",
                        "cores": 2,
                        "mpi_library": "MPICH",
                        "git_commit": "abc",
                    }
                )
    return rows


def write_rows(path, rows, columns=COLUMNS) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
