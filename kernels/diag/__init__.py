"""Diagonal (and spherical) covariances: the paper's kernels.

``em.fit``/``em.em_step`` run EM on the lifted score ``[x*x, x, 1] @ W``; ``one_pass`` and ``two_pass``
hold Algorithms 2 and 3 (``*_ws`` their warp-specialized Hopper variants), ``lift`` builds ``W`` and
``mstep`` turns statistics into parameters; ``reference`` is the float64 oracle. Nothing is imported here,
so ``turbo_gmm.diag.reference`` does not pull in Triton."""
