"""The tree-operations layer: one walker, one copier, one deleter, one link test, one seam per OS.

Everything cachedoctor does to a folder tree goes through here:

* `kinds` — the one link/reparse test (a POSIX symlink, a Windows symlink or junction or any
  other name-surrogate reparse point is a *link*: removed as itself, copied as itself, never
  entered);
* `seam` — which OS seam is in use (`posix.PosixOps` on Linux and macOS, `windows.WindowsOps`
  on Windows); tests swap in a seam over an OS double (tests/doubles/);
* `walk` — the one walker: iterative, depth-first, fd-relative on POSIX (each folder opened
  ``O_NOFOLLOW`` relative to its parent's descriptor and checked against the (st_dev, st_ino)
  seen when it was listed), bounded depth with a clear message instead of a RecursionError,
  optional forked workers on Linux; `cachedoctor.walker.measure` (du-exact sizes),
  `cachedoctor.safedelete.clean_tree` (the one deleter; `remove_tree` is built on it),
  `survey`, `copy`, `verify`, the unit listing (`cachedoctor.cacheunits.tree`) and sweep's
  finder (`cachedoctor.sweep.finder`) are visitors of it;
* `probe` — what a destination filesystem can hold, tried once in a temporary folder there.

Modules here import nothing heavy: commands that never touch a tree do not load them.
"""
