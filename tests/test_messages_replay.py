"""The model against message-heavy runs measured with a core per rank on this VM
(results/vm-2c): stored runs priced again by scripts/messages_accuracy.py --replay with the code
as it is."""

from pathlib import Path

from launch import script

ROOT = Path(__file__).resolve().parent.parent
VM = ROOT / "results" / "vm-2c"


def _replay(profile: str) -> tuple[float, float]:
    """(median |pred/meas - 1| in % of the runs over 10% outside their GEMMs, the model's time
    outside the GEMMs over the measured) of the 72 runs of messages_2a.jsonl."""
    args = ["--records", str(VM / "messages_2a.jsonl"), "--profile", str(VM / profile), "--replay"]
    r = script("messages_accuracy.py", *args)
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip().splitlines()[-1]
    assert "72 runs" in line
    heavy = float(line.split("outside their GEMMs ")[1].split("%")[0])
    return heavy, float(line.rsplit(" ", 1)[1])


def test_messages_with_a_core_per_rank_are_priced_as_they_ran():
    """With the collectives' factors from timings out of the caches up to 16 MiB and the part of
    a posted message the rank pays, the message-heavy runs are priced a median 9.8% off and the
    model puts 0.57 of their time outside the GEMMs there (0.43 with posted messages hidden);
    the profile calibrate made before (warm timings to 4 MiB, messages hidden) prices the same
    runs 17.6% off and 0.13."""
    heavy, outside = _replay("profile.json")
    assert heavy < 12.0 and outside > 0.5
    heavy, outside = _replay("profile_before.json")
    assert heavy > 12.0 and outside < 0.2
