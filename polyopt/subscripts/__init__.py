"""``polyopt.einsum`` and ``polyopt.einsum_path``: numpy's einsum on compiled TC kernels.

call     ``einsum`` and ``einsum_path``: a call's plan (``contraction``), its kernels, cached
args     numpy's calling forms and options, normalized and checked
labels   the subscripts read against the operands' shapes: each dim's label and extent
path     contraction paths (numpy's ``einsum_path``), from subscripts and shapes alone
tc       a contraction as one TC definition, real or complex, in a canonical form
fused    a path of small steps as one TC definition, the intermediates locals
layout   the result's memory layout under ``order=``, and the views numpy returns

Named for what it reads (subscripts), so that no module shares the name of the function
``polyopt.einsum``.
"""
