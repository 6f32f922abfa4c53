"""Regenerates cpython_sort.json, what TestListSortMatchesCPython checks
pyListSort against: lists of every shape (duplicates, runs up and down,
long and short), each with digests of the order CPython's list.sort leaves
and of the comparisons it made, in order.

    python3 third_party/gonja/builtins/testdata/cpython_sort.py
"""
import hashlib, json, os, random, sys

random.seed(11)
cases = []
for _ in range(80):
    n = random.choice([random.randint(0, 70), random.randint(60, 300), random.randint(300, 1200)])
    kind = random.randint(0, 5)
    if kind == 0:
        v = [random.randint(0, 10) for _ in range(n)]
    elif kind == 1:
        v = [random.randint(0, 10**6) for _ in range(n)]
    elif kind == 2:
        v = []
        while len(v) < n:
            run = sorted(random.randint(0, 1000) for _ in range(random.randint(1, 80)))
            v += run[::-1] if random.random() < 0.5 else run
        v = v[:n]
    elif kind == 3:
        v = list(range(n))
        for _ in range(max(1, n // 50) if n else 0):
            v[random.randrange(n)] = random.randint(0, n)
    elif kind == 4:
        v = [i % 7 for i in range(n)]
    else:
        v = sorted(random.randint(0, 100) for _ in range(n))[::-1] + [random.randint(0, 100) for _ in range(n // 3)]
    cases.append(v)


class Key:
    __slots__ = ("v", "i")

    def __init__(self, v, i):
        self.v, self.i = v, i

    def __lt__(self, other):
        log.append("%d,%d;" % (self.i, other.i))
        return self.v < other.v


out = []
for v in cases:
    log = []
    order = [k.i for k in sorted(Key(x, i) for i, x in enumerate(v))]
    out.append({"values": v, "comparisons": len(log),
                "order": hashlib.sha256("".join("%d," % i for i in order).encode()).hexdigest(),
                "digest": hashlib.sha256("".join(log).encode()).hexdigest()})
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "cpython_sort.json"), "w") as f:
    json.dump({"python": sys.version.split()[0], "cases": out}, f, separators=(",", ":"))
print(len(out), "cases, Python", sys.version.split()[0])
