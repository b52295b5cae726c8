"""One user's afternoon, end to end through the real CLI and the built-in profiles:
scan, move, doctor, tune, quota + clean, history, undo, restore — and at the end every file
that was not meant to go is exactly as it was."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import needs_du, needs_posix_paths, result_of, run_cli
from tests.test_relocate_copy import snapshot

SETTINGS = '{\n\t// my editor\n\t"editor.fontSize": 14, // keep this comment\n}\n'


def ok(*args: str) -> subprocess.CompletedProcess[str]:
    result = run_cli(*args)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result


def as_json(*args: str) -> dict:
    return result_of(ok(*args, "--json"))


def make_caches(home: Path) -> tuple[Path, Path, Path]:
    hub = home / ".cache" / "huggingface" / "hub" / "models--org--tiny"
    (hub / "blobs").mkdir(parents=True)
    (hub / "blobs" / "aa11").write_bytes(os.urandom(300_000))
    (hub / "blobs" / "bb22").write_text('{"model_type": "tiny"}')
    snap = hub / "snapshots" / "0123abc"
    snap.mkdir(parents=True)
    (snap / "model.safetensors").symlink_to("../../blobs/aa11")
    (snap / "config.json").symlink_to("../../blobs/bb22")
    (hub / "refs").mkdir()
    (hub / "refs" / "main").write_text("0123abc")
    pip = home / ".cache" / "pip" / "http-v2"
    for i in range(6):
        (pip / f"d{i}").mkdir(parents=True)
        (pip / f"d{i}" / f"body{i}").write_bytes(os.urandom(40_000))
        os.utime(pip / f"d{i}" / f"body{i}", (1_600_000_000 + i * 1000,) * 2)  # d0 is the oldest
    settings = home / ".config" / "Code" / "User" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(SETTINGS)
    return hub.parent, pip.parent, settings


@needs_du
@needs_posix_paths
def test_an_afternoon_with_cachedoctor(isolated_home: Path, tmp_path: Path) -> None:
    hub, pip, settings = make_caches(isolated_home)
    hub_before = snapshot(hub)
    dest = tmp_path / "ai-cache"

    # 1. scan: both caches found, sizes exactly as du counts them
    scan = as_json("scan", "huggingface", "pip")
    found = {(e["tool"], e["location"]): e for e in scan["entries"]}
    du_hub = int(subprocess.run(["du", "-sB1", str(hub)], capture_output=True, text=True,
                                check=True).stdout.split()[0])
    assert found[("huggingface", "hub")]["bytes"] == du_hub
    assert found[("pip", "cache")]["files"] == 6

    # 2. move the hub to another folder with a link (python processes count as "running": --force)
    ok("move", "huggingface", str(dest), "--location", "hub", "--method", "link", "--force", "--yes")
    assert hub.is_symlink() and snapshot(hub) == hub_before
    snap = hub / "models--org--tiny" / "snapshots" / "0123abc"
    assert os.readlink(snap / "model.safetensors") == "../../blobs/aa11"  # still relative
    assert (snap / "config.json").read_text() == '{"model_type": "tiny"}'
    moved = as_json("scan", "huggingface")
    hub_entry = next(e for e in moved["entries"] if e["location"] == "hub")
    assert hub_entry["link"] == "symlink" and hub_entry["target"] == str(dest / "huggingface" / "hub")

    # 3. doctor: nothing wrong with a healthy relocation
    doctor = run_cli("doctor", "huggingface", "--json")
    assert doctor.returncode == 0, doctor.stderr
    assert result_of(doctor)["summary"]["errors"] == 0

    # 4. tune grok: only the three keys are added; a second run changes nothing
    ok("tune", "grok", "--yes")
    tuned = settings.read_text()
    assert "// keep this comment" in tuned and '"grok.code.cacheSize": 8192' in tuned
    again = ok("tune", "grok", "--yes")
    assert "already tuned" in again.stdout + again.stderr
    assert settings.read_text() == tuned

    # 5. a 120 kB quota on pip, enforced by clean: least recently used files go first
    ok("quota", "pip", "120KB", "--yes")
    ok("clean", "--yes")
    left = sorted(p.name for p in pip.rglob("body*"))
    assert left and len(left) < 6
    assert "body0" not in left and "body5" in left  # the oldest went, the newest stayed
    quota = as_json("quota", "list")
    pip_quota = [q for q in quota["quotas"] if q["tool"] == "pip"]
    assert pip_quota and all(q["used_bytes"] <= q["cap_bytes"] and not q["over"] for q in pip_quota)

    # 6. history has every change; undo the tune: the settings file is back byte for byte
    changes = as_json("history")["changes"]
    kinds = [c["kind"] for c in changes]
    assert {"move", "tune", "quota"} <= set(kinds)
    tune_id = next(c["id"] for c in changes if c["kind"] == "tune")
    ok("undo", str(tune_id), "--yes")
    assert settings.read_text() == SETTINGS

    # 7. restore the hub: the same tree as before, no link, nothing left behind in DEST
    ok("restore", "huggingface", "--location", "hub", "--force", "--yes")
    assert not hub.is_symlink() and snapshot(hub) == hub_before
    assert not (dest / "huggingface" / "hub").exists()
