"""Write attncli/scenario.schema.json from the one table of scenario keys (attncli/sources/fields.py).

That table is the scenario's own keys and, for each variant in attncli.core.variants.REGISTRY, the
row its class holds (`schema`, placed after its `schema_after`). Run after changing a key or adding
a variant: python scripts/make_schema.py. tests/test_schema.py fails while the shipped file and the
table differ.
"""

import json
from pathlib import Path

from attncli.sources.fields import json_schema

TARGET = Path(__file__).parent.parent / "attncli" / "scenario.schema.json"


def text() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    TARGET.write_text(text(), encoding="utf-8")
    print(f"wrote {TARGET}")
