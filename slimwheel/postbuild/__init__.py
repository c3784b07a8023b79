"""After the build: tools that rewrite or compare wheels that already exist.

`slim` (a wheel rewritten for some GPUs, through `fatbin_edit`), `variants` (one wheel per GPU family), `diff` (a size
change explained) and `treemap` (the HTML picture of `size-report`). They read wheels through `slimwheel.inspect` and
judge their outputs with `slimwheel.check`; nothing upstream of them imports them.
"""
