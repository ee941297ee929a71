"""The data contract, one floor below storage and io: what a snapshot's tables
hold (:mod:`~clinieval.contract.tabular`, with the references between them as
data), the vocabulary their values take (:mod:`~clinieval.contract.vocabulary`)
and the column-wise validator that checks a snapshot against both
(:mod:`~clinieval.contract.validate`).

Invariant: nothing here imports storage, io, web or audit; the validator reads
the entity classes of :mod:`clinieval.schema.domain` (which depend only on the
vocabulary) for the value rules they state. This ``__init__`` imports nothing,
so reading the tabular contract does not load the validator's dependencies.
"""
