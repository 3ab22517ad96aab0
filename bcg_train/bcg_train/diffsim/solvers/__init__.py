"""The two solves of a substep, with hand-written adjoints: the joint-space inertia's sparse L^T D L
factor (solves and the Delassus operator) and projected Gauss-Seidel on the contact impulses."""
