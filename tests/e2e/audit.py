"""audit.py RULES REPORT.json...: the numbers a report shows belong to
the cells it names (tests/e2e/audit.sh).

Causes: every why-text is its rule's template rendered with the features
the report lists (--features), so each number it quotes is the feature the
template names (a cause only the replay names gives the replay's
account); a metric quoted beside {cell} is that cell's (rel_l2, cosine,
norm ratio, first bad position), one beside {measured} or with no
cell named is the measured cell's, and the element count beside
{nan_cell} is the one in that cell's reason; {alias_sum} matches or is
close.  No look-at holds a placeholder left unrendered.

Cells: every status follows from the metrics shown for the cell and the
tolerance, and the numbers its reason quotes are those metrics; an MoE
layer's mlp.topk_ids follows from the report's routing entry.

Prints one line per failure and a count; exit 1 on any failure."""
import json, math, re, sys

WORDS = ("cell", "tap", "layer", "ref_name", "cand_name", "nan_cell", "dup_tap", "measured", "alias_sum")
CELL_METRICS = {"rel_l2": "rel_l2", "cosine": "cosine", "norm_ratio": "norm_ratio", "first_bad_pos": "first_bad_position"}
fails = 0


def fail(path, msg):
    global fails
    fails += 1
    print("%s: %s" % (path, msg))


def cname(c):
    return c["tap"] if c["layer"] is None else "L%d.%s" % (c["layer"], c["tap"])


def render(tmpl, feat):
    """The template as a regex: features rendered as the C code renders them, words captured."""
    out, words = "", []
    for lit, ph in re.findall(r"([^{]*)(\{[^}]*\}|$)", tmpl):
        out += re.escape(lit)
        if not ph:
            continue
        name, _, fmt = ph[1:-1].partition(":")
        if name in WORDS:
            out += "(.+?)"
            words.append(name)
            continue
        v = feat.get(name)
        out += re.escape("n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else ("%" + (fmt or ".3g")) % v)
    return out, words


def audit_causes(path, rep, rules):
    feat, cells = rep["features"], {cname(c): c for c in rep["cells"]}
    at = rep.get("causes_measured_at") or rep.get("first_divergence") or {}
    measured = at.get("cell") if at else None
    for cause in rep["causes"]:
        why = cause["why"]
        # a look-at is rendered as the why is, a replay's own cause's too
        left = re.search(r"\{[a-z_0-9]+(:[^}]*)?\}", cause["look_at"])
        if left:
            fail(path, "%s: look-at with %s left unrendered: %r" % (cause["id"], left.group(0), cause["look_at"]))
        # a cause only the replay names says what the replay measured
        if cause.get("confirmed") and why.startswith("replay of ") and cause["confirmed"]["variant"] in why:
            continue
        tried = [r for r in rules if r["id"] == cause["id"]]
        hit = None
        for r in tried:
            rx, words = render(r["why"], feat)
            m = re.fullmatch(rx + r"(; a sketch's.*)?", why)
            if m:
                hit = dict(zip(words, m.groups()))
                break
        if hit is None:
            if tried:
                fail(path, "%s: why-text is no rendering of its rule's template with the features: %r" % (cause["id"], why))
            continue
        tmpl = next(r["why"] for r in tried if re.fullmatch(render(r["why"], feat)[0] + r"(; a sketch's.*)?", why))
        target = (rep.get("first_divergence") or {}).get("cell")
        # {cell} is the first divergence, or the attention or MLP it is the output of (measured there)
        if "cell" in hit and target and hit["cell"] not in (target, measured):
            fail(path, "%s: names cell %s, the first divergence is %s" % (cause["id"], hit["cell"], target))
        if "measured" in hit and hit["measured"] != measured:
            fail(path, "%s: names %s as measured, the report says %s" % (cause["id"], hit["measured"], measured))
        # a metric quoted beside {cell} is that cell's, unless the template names {measured}
        about = hit["cell"] if "cell" in hit and "measured" not in hit else measured
        c = cells.get(about)
        for fname, cfield in CELL_METRICS.items():
            if "{" + fname not in tmpl or c is None:
                continue
            fv, cv = feat.get(fname), c.get(cfield)
            if fv is None or cv is None:
                continue
            if not math.isclose(fv, cv, rel_tol=1e-9, abs_tol=1e-12):
                fail(path, "%s: quotes %s %r, the cell %s shows %r" % (cause["id"], fname, fv, about, cv))
        # {alias_sum} is said to match: its status must say so
        if "alias_sum" in hit and (cells.get(hit["alias_sum"]) or {}).get("status") not in ("match", "close"):
            fail(path, "%s: says %s matches, the report says %r" % (cause["id"], hit["alias_sum"],
                                                                   (cells.get(hit["alias_sum"]) or {}).get("status")))
        if "nan_cell" in hit and hit["nan_cell"] in cells:
            n = cells[hit["nan_cell"]]
            m = re.match(r"NaN/Inf mismatch at (\d+) elements", n["reason"])
            if "{nan_first" in tmpl and (not m or feat.get("nan_first") != int(m.group(1))):
                fail(path, "%s: quotes %r elements with NaN/Inf on one side at %s, whose reason is %r" % (cause["id"], feat.get("nan_first"), hit["nan_cell"], n["reason"]))


def g3(v):
    return "%.3g" % v


def audit_routing(path, c, name, layers):
    """mlp.topk_ids is judged by its expert sets: its reason and status are
    the report's routing entry for its layer."""
    if not layers:
        fail(path, "%s: no routing entry for its layer" % name)
        return
    l = layers[0]
    flips, bad, why, st = len(l["flipped"]), len(l["disagree"]), c["reason"], c["status"]
    m = re.fullmatch(r"expert sets differ at (\d+) of (\d+) positions, (not near ties|each a near tie)", why)
    if why.startswith("the expert sets agree at every position"):
        ok = st == "match" and not flips and not bad and l["agree"] + l["excluded"] == l["positions"]
    elif m and m.group(3) == "each a near tie":
        ok = st == "close" and not bad and int(m.group(1)) == flips
    elif m:
        ok = st == "diverged" and bad and int(m.group(1)) == flips + bad and math.isclose(c["rel_l2"], bad / l["positions"])
    else:
        ok = False
    if not ok or (m and int(m.group(2)) != l["positions"]):
        fail(path, "%s: %r, status %s, against routing %r" % (name, why, st, l))


def audit_cells(path, rep):
    tol = rep["tolerance"]
    for c in rep["cells"]:
        name, st, why = cname(c), c["status"], c["reason"]
        t = c.get("tolerance") or tol
        if c["ref_name"] is None or c["cand_name"] is None:
            if st != "missing":
                fail(path, "%s: one side missing, status %s" % (name, st))
            continue
        if why.startswith("shapes differ"):
            if st != "diverged" or any(c.get(k) is not None for k in ("rel_l2", "cosine", "max_abs")):
                fail(path, "%s: shapes differ but status %s or metrics shown" % (name, st))
            continue
        if why.startswith("NaN/Inf mismatch"):
            if st != "diverged":
                fail(path, "%s: NaN/Inf mismatch, status %s" % (name, st))
            continue
        if re.fullmatch(r"(\d+) experts selected per position by .+, (\d+) by .+", why):
            k = re.fullmatch(r"(\d+) experts selected per position by .+, (\d+) by .+", why).groups()
            if st != "diverged" or k[0] == k[1] or c["rel_l2"] is not None:
                fail(path, "%s: %r, status %s, rel_l2 %r" % (name, why, st, c["rel_l2"]))
            continue
        if c["tap"] == "mlp.topk_ids" and rep.get("routing"):
            audit_routing(path, c, name, [l for l in rep["routing"] if l["layer"] == c["layer"]])
            continue
        rel, frac = c["rel_l2"], c["allclose_frac"]
        m = re.fullmatch(r"rel_l2 (\S+) > diverge (\S+)", why)
        if m:
            if st != "diverged" or m.group(1) != g3(rel) or not rel > t["diverge"]:
                fail(path, "%s: %r against rel_l2 %r, status %s" % (name, why, rel, st))
            continue
        m = re.fullmatch(r"mean KL (\S+) > max-kl (\S+)", why)
        if m:
            kl = rep["logits"]["kl_mean"]
            if st != "diverged" or m.group(1) != g3(kl) or not kl > t["max_kl"] or rel > t["diverge"]:
                fail(path, "%s: %r against KL %r, rel_l2 %r, status %s" % (name, why, kl, rel, st))
            continue
        if rel > t["diverge"]:
            fail(path, "%s: rel_l2 %r above diverge but %r (%s)" % (name, rel, why, st))
            continue
        m = re.fullmatch(r"(\S+)% of elements outside allclose, rel_l2 (\S+)", why)
        if m:
            if st != "close" or frac >= 1 or m.group(2) != g3(rel) or m.group(1) != "%.4g" % (100 * (1 - frac)):
                fail(path, "%s: %r against allclose %r, rel_l2 %r, status %s" % (name, why, frac, rel, st))
            continue
        if why == "every element within allclose":
            if st != "match" or frac != 1:
                fail(path, "%s: match with allclose %r" % (name, frac))
            continue
        fail(path, "%s: a reason the audit does not know: %r" % (name, why))


rules = json.load(open(sys.argv[1]))
rules = rules["rules"] if isinstance(rules, dict) else rules
n = 0
for path in sys.argv[2:]:
    rep = json.load(open(path))
    audit_causes(path, rep, rules)
    audit_cells(path, rep)
    n += 1
print("audited %d reports, %d failures" % (n, fails))
sys.exit(1 if fails else 0)
