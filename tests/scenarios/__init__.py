"""Small training loops with one known problem each (or none), for the diagnosis tests.

Each module has ``train(device, steps)``. The line that causes a host read carries a
``# expect: <kind>`` comment, so tests find its line number instead of hard-coding it.
"""
