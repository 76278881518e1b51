#!/usr/bin/env python3
"""compare.py -- the table of bench/compare: two libraries, every metric, one sitting.

Reads the credisson-bench --json lines of each round of each side (files
<dir>/<side>-<round>.jsonl, side "base" or "head") and prints, per scenario and metric:
the base's and the head's median [min-max] over all their repetitions, the ratio of the
two medians (head / base), the median [min-max] of the paired ratios (round k's head
over round k's base: the two ran next to each other, so the machine's drift between
rounds cancels), and a two-sided Mann-Whitney U test's p-value over the repetitions.
Like Go's benchstat, a ratio whose p-value is above 0.05 is shown as "~" (no difference
this sitting can tell), and the table is a report: it never fails.

Usage: compare.py DIR [--json]   (bench/compare runs it; stdlib only)
"""
import json
import math
import os
import sys
from itertools import combinations


def load(dirname, side):
    """{(scenario, metric): [values per round]}, and the rounds seen."""
    out, rounds = {}, 0
    for fn in sorted(os.listdir(dirname)):
        if not (fn.startswith(side + "-") and fn.endswith(".jsonl")):
            continue
        rnd = int(fn[len(side) + 1:-len(".jsonl")])
        rounds = max(rounds, rnd)
        with open(os.path.join(dirname, fn)) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                o = json.loads(line)
                if o.get("impl") != "credisson":
                    continue
                for name, m in o["metrics"].items():
                    vals = [v for v in m.get("values", []) if v is not None]
                    out.setdefault((o["scenario"], name), {})[rnd] = vals
    return out, rounds


def median(v):
    s = sorted(v)
    n = len(s)
    if n == 0:
        return None
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def mann_whitney_p(a, b):
    """Two-sided p-value of the Mann-Whitney U test: exact for small samples (every way
    of splitting the pooled ranks), else the normal approximation with ties."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return None
    pooled = sorted((v, i) for i, v in enumerate(a + b))
    ranks = [0.0] * (n1 + n2)
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[pooled[k][1]] = (i + j) / 2 + 1
        i = j + 1
    r1 = sum(ranks[:n1])
    u1 = r1 - n1 * (n1 + 1) / 2
    mean = n1 * n2 / 2
    if math.comb(n1 + n2, n1) <= 20000:
        extreme = abs(u1 - mean)
        hits = total = 0
        for pick in combinations(range(n1 + n2), n1):
            u = sum(ranks[k] for k in pick) - n1 * (n1 + 1) / 2
            total += 1
            if abs(u - mean) >= extreme - 1e-9:
                hits += 1
        return hits / total
    ties = {}
    for v in a + b:
        ties[v] = ties.get(v, 0) + 1
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - sum(t ** 3 - t for t in ties.values()) / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u1 - mean) - 0.5) / math.sqrt(var)
    return math.erfc(z / math.sqrt(2))


def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        return "%.0f" % v
    if a >= 100:
        return "%.1f" % v
    if a >= 1:
        return "%.3g" % v if a < 10 else "%.1f" % v
    return "%.3g" % v


def rows(base, head):
    keys = sorted(set(base) | set(head), key=lambda k: (k[0], k[1]))
    for scen, metric in keys:
        b, h = base.get((scen, metric), {}), head.get((scen, metric), {})
        bv = [x for r in sorted(b) for x in b[r]]
        hv = [x for r in sorted(h) for x in h[r]]
        bm, hm = median(bv), median(hv)
        ratio = hm / bm if bm not in (None, 0) and hm is not None else None
        paired = []
        for r in sorted(set(b) & set(h)):
            pb, ph = median(b[r]), median(h[r])
            if pb not in (None, 0) and ph is not None:
                paired.append(ph / pb)
        p = mann_whitney_p(bv, hv)
        yield {
            "scenario": scen, "metric": metric,
            "base": {"median": bm, "min": min(bv) if bv else None, "max": max(bv) if bv else None,
                     "n": len(bv)},
            "head": {"median": hm, "min": min(hv) if hv else None, "max": max(hv) if hv else None,
                     "n": len(hv)},
            "ratio": ratio,
            "paired": {"median": median(paired), "min": min(paired) if paired else None,
                       "max": max(paired) if paired else None, "n": len(paired)},
            "p": p,
        }


def main():
    if len(sys.argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    d = sys.argv[1]
    base, nb = load(d, "base")
    head, nh = load(d, "head")
    out = list(rows(base, head))
    if "--json" in sys.argv[2:]:
        for r in out:
            print(json.dumps(r))
        return 0
    label = {}
    for side in ("base", "head"):
        p = os.path.join(d, side + ".label")
        label[side] = open(p).read().strip() if os.path.exists(p) else side
    print("base: %s (%d rounds)   head: %s (%d rounds)" % (label["base"], nb, label["head"], nh))
    print("ratio = head/base of the medians; paired = each round's head over the base next to it;")
    print("'~' where a two-sided Mann-Whitney U test over the repetitions gives p > 0.05.")
    scen = None
    w = 34
    for r in out:
        if r["scenario"] != scen:
            scen = r["scenario"]
            print("\n%s" % scen)
            print("  %-*s %-24s %-24s %-8s %-20s %s" % (w, "metric", "base", "head", "ratio",
                                                        "paired", "p"))
        def side(s):
            if s["median"] is None:
                return "-"
            return "%s [%s-%s]" % (fmt(s["median"]), fmt(s["min"]), fmt(s["max"]))
        ratio = "-" if r["ratio"] is None else ("%.3f" % r["ratio"])
        p = r["p"]
        if p is not None and p > 0.05 and r["ratio"] is not None:
            ratio = "~"
        pr = r["paired"]
        paired = "-" if pr["median"] is None else "%.3f [%.3f-%.3f]" % (pr["median"], pr["min"],
                                                                       pr["max"])
        print("  %-*s %-24s %-24s %-8s %-20s %s" % (w, r["metric"][:w], side(r["base"]),
                                                    side(r["head"]), ratio, paired,
                                                    "-" if p is None else "%.3f" % p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
