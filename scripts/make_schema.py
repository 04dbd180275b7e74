"""Write attncli/scenario.schema.json from the one table of scenario keys (attncli/sources/fields.py).

Run after changing a key: python scripts/make_schema.py. tests/test_schema.py fails while the
shipped file and the table differ.
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
