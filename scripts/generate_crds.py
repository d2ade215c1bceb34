"""Regenerates crds/*.yaml from the API models in shared/api (run after changing a model).

    python scripts/generate_crds.py

Stale files of kinds that no longer exist are removed; tests/shared/test_crds.py fails while the
committed files differ from what this would write.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shared.api.registry import RESOURCE_MODELS  # noqa: E402
from shared.crdgen import rendered_crds  # noqa: E402

CRD_DIR = Path(__file__).resolve().parent.parent / "crds"


def main() -> None:
    CRD_DIR.mkdir(exist_ok=True)
    files = rendered_crds(RESOURCE_MODELS)
    for stale in set(p.name for p in CRD_DIR.glob("*.yaml")) - files.keys():
        (CRD_DIR / stale).unlink()
        print(f"removed crds/{stale}")
    for name, text in files.items():
        path = CRD_DIR / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote crds/{name}")


if __name__ == "__main__":
    main()
