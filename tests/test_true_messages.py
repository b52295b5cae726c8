"""Every message true, every round trip exact (issue 15): what a demanding new user notices first."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import result_of, run_cli


def df_columns(path: Path, *fields: str) -> list[str]:
    out = subprocess.run(["df", "-B1", f"--output={','.join(fields)}", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return out.splitlines()[1].split()


def test_drive_table_used_percent_matches_df_and_shows_reserved(isolated_home: Path,
                                                               make_realfs: Any) -> None:
    drive = make_realfs("ext4", size="64M", name="reserved")  # mkfs.ext4 reserves 5% for root
    folder = drive.path / "cache"
    folder.mkdir()
    (folder / "blob").write_bytes(b"x" * 20_000_000)
    used, avail, size, pcent = df_columns(drive.path, "used", "avail", "size", "pcent")
    entry = result_of(run_cli("scan", "--path", str(folder), "--json"))["entries"][0]["drive"]
    assert entry["used_bytes"] == int(used) and entry["free_bytes"] == int(avail)
    assert entry["reserved_bytes"] == int(size) - int(used) - int(avail) > 0
    percent = math.ceil(100 * int(used) / (int(used) + int(avail)))
    assert pcent == f"{percent}%"
    table = run_cli("scan", "--path", str(folder)).stdout
    [row] = [line for line in table.splitlines() if line.startswith(str(drive.path))]
    assert f" {percent}% " in row
    assert "reserved" in table
