"""The metrics ``evaluate`` reports beyond accuracy, accumulated block by block: the
confusion matrix, per-class precision / recall / F1, balanced accuracy, and for binary
models the ROC AUC of the decision values.

The AUC is exact (Mann–Whitney with ties counted half, as scikit-learn's
``roc_auc_score``) while the scores fit :data:`AUC_ROWS` rows (8 bytes each); past that, it
is computed from a uniform random sample of that many rows (each row gets a seeded random
key, the smallest keys are kept), and the report says how many rows it used.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Metrics", "AUC_ROWS", "metrics_text"]

AUC_ROWS = 1 << 24          # scores kept for the AUC: 16.8 M rows, 134 MB


class Metrics:
    """Accumulates the confusion matrix (rows: true class, columns: predicted) and, for a
    binary model, the decision values of the positive class (``classes[1]``)."""

    def __init__(self, classes, binary: bool, auc_rows: int = AUC_ROWS, seed: int = 0):
        self.classes = classes
        self.confusion = np.zeros((len(classes), len(classes)), dtype=np.int64)
        self.binary, self.cap = binary, int(auc_rows)
        self.rng = np.random.default_rng(seed)
        self.scores: list[np.ndarray] = []
        self.pos: list[np.ndarray] = []
        self.keys: list[np.ndarray] = []
        self.kept = self.seen = 0

    def add(self, truth: np.ndarray, predicted: np.ndarray, scores: np.ndarray) -> None:
        """A block: the true and predicted class indices, and (binary) its decision values."""
        k = len(self.classes)
        self.confusion += np.bincount(truth * k + predicted, minlength=k * k).reshape(k, k)
        if not self.binary:
            return
        self.seen += len(truth)
        self.scores.append(np.asarray(scores, dtype=np.float64))
        self.pos.append(truth == 1)
        self.keys.append(self.rng.random(len(truth)))
        self.kept += len(truth)
        if self.kept > 2 * self.cap:        # past twice the cap: keep the smallest keys
            self._shrink()

    def _shrink(self) -> None:
        keys, scores, pos = (np.concatenate(a) for a in (self.keys, self.scores, self.pos))
        if len(keys) > self.cap:
            keep = np.argpartition(keys, self.cap - 1)[:self.cap]
            keys, scores, pos = keys[keep], scores[keep], pos[keep]
        self.keys, self.scores, self.pos, self.kept = [keys], [scores], [pos], len(keys)

    def report(self) -> dict:
        """The metrics as ``evaluate`` returns them (undefined ratios are None)."""
        from .io import label_key
        C = self.confusion
        tp = np.diag(C).astype(np.float64)
        rows, predicted = C.sum(axis=1), C.sum(axis=0)
        per = {}
        for c, label in enumerate(self.classes):
            p = float(tp[c] / predicted[c]) if predicted[c] else None
            r = float(tp[c] / rows[c]) if rows[c] else None
            # F1 as scikit-learn's (zero_division=0): 0 when one of them is undefined,
            # undefined for a class neither in the data nor predicted
            f1 = None if p is None and r is None else \
                2 * p * r / (p + r) if p is not None and r is not None and p + r else 0.0
            per[label_key(label)] = {"rows": int(rows[c]), "accuracy": r, "precision": p,
                                     "recall": r, "f1": f1}
        recalls = [v["recall"] for v in per.values() if v["recall"] is not None]
        f1s = [v["f1"] for v in per.values() if v["f1"] is not None]
        out = {"per_class": per,
               "confusion_matrix": {"labels": [label_key(c) for c in self.classes],
                                    "matrix": C.tolist()},
               "balanced_accuracy": float(np.mean(recalls)) if recalls else None,
               "macro_f1": float(np.mean(f1s)) if f1s else None}
        if self.binary:
            self._shrink()
            out["roc_auc"] = _auc(self.scores[0], self.pos[0])
            out["roc_auc_rows"] = int(len(self.scores[0]))
        return out


def _auc(scores: np.ndarray, pos: np.ndarray) -> float | None:
    """ROC AUC: the probability that a positive row scores above a negative one, ties
    counted half (None without both classes)."""
    n_pos = int(np.count_nonzero(pos))
    n_neg = len(pos) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    from scipy.stats import rankdata
    ranks = rankdata(scores)                # ties get their mean rank
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def metrics_text(res: dict) -> list[str]:
    """The lines ``evaluate`` prints after its accuracy line."""
    def f(v):
        return "-" if v is None else f"{v:.4f}"
    head = [f"balanced accuracy {f(res['balanced_accuracy'])}",
            f"macro F1 {f(res['macro_f1'])}"]
    if "roc_auc" in res:
        sample = "" if res["roc_auc_rows"] == res["n_rows"] else \
            f" (from a uniform sample of {res['roc_auc_rows']:,} of {res['n_rows']:,} rows)"
        head.append(f"ROC AUC {f(res['roc_auc'])}{sample}")
    lines = [", ".join(head)]
    cm = res["confusion_matrix"]
    labels = cm["labels"]
    width = max(8, max(len(s) for s in labels) + 1,
                max(len(f"{v:,}") for row in cm["matrix"] for v in row) + 1)
    lines.append("confusion matrix (rows: true class, columns: predicted):")
    lines.append(" " * width + "".join(f"{s:>{width}}" for s in labels))
    for s, row in zip(labels, cm["matrix"]):
        lines.append(f"{s:>{width}}" + "".join(f"{v:>{width},}" for v in row))
    lines.append(f"{'class':>{width}}{'precision':>11}{'recall':>9}{'F1':>9}{'rows':>12}")
    for s, c in res["per_class"].items():
        lines.append(f"{s:>{width}}{f(c['precision']):>11}{f(c['recall']):>9}{f(c['f1']):>9}"
                     f"{c['rows']:>12,}")
    return lines
