"""Types of cachedoctor/fs/_native.c (see its header for what each part means)."""

from cachedoctor.fs.seam import FolderCounter, FolderLister

ABI: int
count_folder: FolderCounter
list_folder: FolderLister
