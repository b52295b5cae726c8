"""Types of cachedoctor/fs/_native.c (see its header for what each part means)."""

ABI: int

def count_folder(
    fd: int, root_dev: int, one_file_system: bool, /
) -> tuple[int, int, int, int, float, list[tuple[str, int, int]],
           list[tuple[int, int, int, int, float]], list[tuple[str, int]]]: ...
