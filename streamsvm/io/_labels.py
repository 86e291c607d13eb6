"""Label encoding shared by the converter and in-memory stores.

Binary problems (two distinct labels, e.g. {-1,+1}, {0,1}, {1,2}) are stored as float32
±1 with the larger original label → +1. More than two labels → multiclass, stored as int32
class indices into the sorted original labels.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..exceptions import FormatError, InvalidParameterError

__all__ = ["EncodedLabels", "encode_labels", "label_key", "plan_labels", "apply_label_plan"]

TASKS = ("auto", "binary", "multiclass")


def label_key(value: float) -> str:
    """The JSON key of an original label: ``"1"`` for 1.0, ``"0.5"`` for 0.5."""
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


@dataclasses.dataclass(frozen=True)
class EncodedLabels:
    task: str
    classes: np.ndarray        # original labels, stored order
    y: np.ndarray              # encoded labels
    counts: dict               # label_key(original) -> count


def plan_labels(distinct: np.ndarray, *, task: str = "auto", source: str = "input") -> tuple[str, np.ndarray]:
    """Decide the task and the stored class order from the distinct original labels."""
    if task not in TASKS:
        raise InvalidParameterError(f"The 'task' parameter must be one of {TASKS}. Got {task!r} instead.")
    classes = np.unique(np.asarray(distinct, dtype=np.float64))
    if len(classes) == 0:
        raise FormatError("no labelled rows", file=source)
    if task == "auto":
        task = "binary" if len(classes) <= 2 else "multiclass"
    if task == "binary" and len(classes) > 2:
        shown = ", ".join(label_key(c) for c in classes[:6])
        raise FormatError(f"--task binary but the labels take {len(classes)} values ({shown}"
                          f"{', ...' if len(classes) > 6 else ''})", file=source)
    return task, classes


def apply_label_plan(labels: np.ndarray, task: str, classes: np.ndarray) -> np.ndarray:
    """Encode original labels: binary → float32 ±1, multiclass → int32 class index."""
    labels = np.asarray(labels, dtype=np.float64)
    if task == "binary":
        if len(classes) == 1:  # one class only: +1 unless the label is <= 0
            return np.full(len(labels), 1.0 if classes[0] > 0 else -1.0, dtype=np.float32)
        return np.where(labels == classes[1], 1.0, -1.0).astype(np.float32)
    return np.searchsorted(classes, labels).astype(np.int32)


def encode_labels(labels: np.ndarray, *, task: str = "auto", source: str = "input") -> EncodedLabels:
    """Plan and apply the label encoding in one step (for data already in memory)."""
    values, counts = np.unique(np.asarray(labels, dtype=np.float64), return_counts=True)
    task, classes = plan_labels(values, task=task, source=source)
    return EncodedLabels(task, classes, apply_label_plan(labels, task, classes),
                         {label_key(v): int(c) for v, c in zip(values, counts)})
