"""Draw docs/bench/chart.png from target/bench/results.json (make bench runs it)."""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

root = Path(__file__).resolve().parent.parent
data = json.loads((root / "target/bench/results.json").read_text())
rows = [r for r in data["rows"] if r.get("ratio") is not None]
fig, ax = plt.subplots(figsize=(max(9, 0.5 * len(rows)), 5))
names = [r["id"] for r in rows]
ratios = [r["ratio"] for r in rows]
colors = ["tab:green" if r.get("met") else ("tab:red" if r.get("met") is False else "tab:gray") for r in rows]
ax.bar(names, ratios, color=colors)
ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
ax.set_yscale("log")
ax.set_ylabel("choudoufu-live / stock (log scale; below 1 is better)")
ax.set_title(
    "choudoufu-live against terraform's backend \"s3\" with use_lockfile\n"
    "(SeaweedFS behind 20 ms per request; rows marked /moto on moto)"
)
for i, v in enumerate(ratios):
    ax.text(i, v, f"{v:.3g}", ha="center", va="bottom", fontsize=8)
plt.xticks(rotation=30, ha="right")
plt.tight_layout()
out = root / "docs/bench/chart.png"
plt.savefig(out, dpi=110)
print(f"plot-bench: wrote {out}", file=sys.stderr)
