"""The causes, one unit each: a rule is a function ``(compile, step, walk) -> Cause | None``
whose docstring says what evidence it reads and what it concludes. ``registry`` lists them
in precedence order; the first rule that answers decides."""
