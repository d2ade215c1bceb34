"""Regenerates crds/*.yaml from the API models in shared/api (run after changing a model), and
each chart's copy of the CRDs it installs, charts/<chart>/files/crds/ (shared.api.registry
CHART_MODELS; its templates/crds.yaml renders them, so that `helm upgrade` upgrades them).

    python scripts/generate_crds.py

Stale files of kinds that no longer exist are removed; tests/shared/test_crds.py fails while the
committed files differ from what this would write.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.api.registry import CHART_MODELS, RESOURCE_MODELS  # noqa: E402
from shared.crdgen import rendered_crds  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CRD_DIR = ROOT / "crds"


def chart_crd_dir(chart: str) -> Path:
    return ROOT / "charts" / chart / "files" / "crds"


def write(directory: Path, files: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    where = directory.relative_to(ROOT)
    for stale in set(p.name for p in directory.glob("*.yaml")) - files.keys():
        (directory / stale).unlink()
        print(f"removed {where}/{stale}")
    for name, text in files.items():
        path = directory / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {where}/{name}")


def main() -> None:
    write(CRD_DIR, rendered_crds(RESOURCE_MODELS))
    for chart, models in CHART_MODELS.items():
        write(chart_crd_dir(chart), rendered_crds(models))


if __name__ == "__main__":
    main()
