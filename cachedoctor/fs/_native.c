/* cachedoctor.fs._native: the per-entry loops of two walks, in C.
 *
 * Why: `scan --path` spends the kernel's time in getdents64 and fstatat, the same as du;
 * in Python every entry also costs a str, an os.stat_result (with its float and nanosecond
 * times) and a few bytecodes, which made the scan use 1.6x du's CPU, and the same loop was
 * half of `ls` of a Hugging Face hub. Both functions list one folder with getdents64 (from
 * its descriptor's offset, rewound after, as os.listdir(fd) does) and
 * fstatat every name relative to it, with the GIL released while the system calls run (a
 * progress thread keeps drawing). Read-only: they list, stat and read links, nothing else.
 * A folder that cannot be listed raises OSError, as os.listdir(fd) does.
 *
 * count_folder(fd, root_dev, one_file_system) ->
 *     (blocks, size, files, dirs, newest, subdirs, linked, errors)
 *   The measuring walk (cachedoctor/walker.py, `_Measure._count`). No Python object is made
 *   for a plain file: only subfolders, hard-linked files (nlink > 1) and failures come back.
 *   blocks, size  st_blocks and st_size of every entry counted here (plain files and folders)
 *   files, dirs   how many of each were counted here
 *   newest        the largest st_mtime among them, as float (-inf when none)
 *   subdirs       [(name, st_dev, st_ino)] folders to walk (on another device with
 *                 one_file_system: left out and not counted, as du -x does)
 *   linked        [(st_dev, st_ino, st_blocks, st_size, st_mtime)] non-folders with nlink > 1,
 *                 not counted: the caller counts each inode once
 *   errors        [(name, errno)] entries whose fstatat failed, except ENOENT, ENOTDIR and
 *                 ELOOP (gone since the listing: they take no space)
 *
 * list_folder(fd, prefix, make_entry, block_unit) -> (entries, subdirs, errors)
 *   The unit listing (cachedoctor/cacheunits/tree.py, `_Lister._scan`): one entry per name,
 *   in listing order, made by calling make_entry(rel, is_dir, is_link, is_file, allocated,
 *   atime, mtime, (st_dev, st_ino), nlink, target) with rel = prefix + name, allocated =
 *   st_blocks * block_unit and target what readlinkat says for a symbolic link (None when it
 *   fails or for anything else). Every value is what os.lstat, os.readlink and os.listdir
 *   give for the same entry (names and targets decoded as they decode them).
 *   subdirs       [(name, entry)] the folders among them, in listing order
 *   errors        [(name, errno)] names whose fstatat failed (no entry made)
 *
 * Each counts exactly as the Python loop it replaces, which stays as the fallback and as the
 * reference the tests hold it to (tests/test_walker_native.py, tests/test_units_native.py).
 * ABI (a module constant) changes whenever a signature or a result's shape does: the caller
 * refuses a module built from another version of this file (a stale build in a source tree).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define ABI 3

/* ---- shared by both loops ------------------------------------------------------------- */

/* Names (and link targets) of one folder, NUL-terminated, one after another. */
typedef struct {
    char *bytes;
    size_t used, room;
} arena;

/* A copy of `len` bytes plus a NUL; its offset, or -1 when memory ran out (offsets, not
 * pointers: the arena moves as it grows). */
static ssize_t arena_put(arena *a, const char *text, size_t len) {
    if (a->used + len + 1 > a->room) {
        size_t room = a->room ? a->room * 2 : 16384;
        while (room < a->used + len + 1) room *= 2;
        char *grown = realloc(a->bytes, room);
        if (grown == NULL) return -1;
        a->bytes = grown;
        a->room = room;
    }
    ssize_t at = (ssize_t)a->used;
    memcpy(a->bytes + a->used, text, len);
    a->bytes[a->used + len] = 0;
    a->used += len + 1;
    return at;
}

/* One folder's names, read with getdents64 straight from the caller's descriptor: readdir
 * needs a duplicate and a DIR (fcntl, fstat and fcntl in fdopendir, two lseeks, a close), six
 * system calls a folder that were a fifth of a 2,000-repo hub's listing. Read from the
 * descriptor's offset and rewound after, as os.listdir(fd) does (both walks list a folder
 * they have just opened). */
struct dirent_record { /* the kernel's struct linux_dirent64 (getdents(2)) */
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

typedef struct {
    int fd;
    long at, end;
    union { /* records are 8-byte aligned in the buffer */
        char bytes[32768];
        unsigned long long align;
    } buffer;
} names;

static void open_names(names *n, int fd) {
    n->fd = fd;
    n->at = n->end = 0;
}

/* The next name but `.` and `..`; NULL at the end (with *err set when getdents64 failed). */
static const char *next_name(names *n, int *err) {
    for (;;) {
        if (n->at >= n->end) {
            long got;
            do {
                got = syscall(SYS_getdents64, n->fd, n->buffer.bytes, sizeof n->buffer.bytes);
            } while (got < 0 && errno == EINTR);
            if (got <= 0) {
                if (got < 0) *err = errno;
                return NULL;
            }
            n->at = 0;
            n->end = got;
        }
        const struct dirent_record *entry = (const struct dirent_record *)(n->buffer.bytes + n->at);
        n->at += entry->d_reclen;
        const char *name = entry->d_name;
        if (!(name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0)))) return name;
    }
}

/* Leave the offset where os.listdir(fd) leaves it: the start. */
static void close_names(names *n) {
    lseek(n->fd, 0, SEEK_SET);
}

/* fstatat without following a link, retried on EINTR: 0, or the errno. */
static int stat_at(int fd, const char *name, struct stat *st) {
    int rc;
    do {
        rc = fstatat(fd, name, st, AT_SYMLINK_NOFOLLOW);
    } while (rc != 0 && errno == EINTR);
    return rc == 0 ? 0 : (errno ? errno : EIO);
}

/* ---- count_folder --------------------------------------------------------------------- */

enum { REC_DIR = 0, REC_LINKED = 1, REC_ERROR = 2 };

typedef struct {
    int kind;
    int err;
    unsigned long long dev;
    unsigned long long ino;
    long long blocks;
    long long size;
    double mtime;
    size_t name; /* offset into the name arena */
} record;

typedef struct {
    record *items;
    size_t count, cap;
    arena names;
} records;

static int records_add(records *r, const record *item, const char *name) {
    if (r->count == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        record *grown = realloc(r->items, cap * sizeof(record));
        if (grown == NULL) return -1;
        r->items = grown;
        r->cap = cap;
    }
    ssize_t at = arena_put(&r->names, name, strlen(name));
    if (at < 0) return -1;
    r->items[r->count] = *item;
    r->items[r->count].name = (size_t)at;
    r->count++;
    return 0;
}

/* st_atime or st_mtime as os.stat computes it (CPython's fill_time: sec + nsec * 1e-9), bit
 * for bit; st_mtim is Linux's name (hatch_build.py builds this on Linux only) */
static double time_of(const struct timespec *ts) {
    return (double)ts->tv_sec + (double)ts->tv_nsec * 1e-9;
}

/* A sum that cannot overflow (st_blocks and st_size are never negative; a folder of huge
 * sparse files exceeds 2^63 bytes): two 64-bit words with a carry. */
typedef struct {
    unsigned long long high, low;
} wide;

static void wide_add(wide *sum, unsigned long long value) {
    sum->low += value;
    if (sum->low < value) sum->high++;
}

static PyObject *wide_to_long(const wide *sum) {
    PyObject *high = PyLong_FromUnsignedLongLong(sum->high), *shift = NULL, *low = NULL,
             *shifted = NULL, *total = NULL;
    if (high == NULL) goto done;
    shift = PyLong_FromLong(64);
    low = PyLong_FromUnsignedLongLong(sum->low);
    if (shift == NULL || low == NULL) goto done;
    shifted = PyNumber_Lshift(high, shift);
    if (shifted == NULL) goto done;
    total = PyNumber_Add(shifted, low);
done:
    Py_XDECREF(high);
    Py_XDECREF(shift);
    Py_XDECREF(low);
    Py_XDECREF(shifted);
    return total;
}

typedef struct {
    wide blocks, size;
    long long files, dirs;
    double newest;
    int list_errno; /* the folder itself could not be listed */
    int oom;
} totals;

/* Runs without the GIL: only system calls and C memory. */
static void count(int fd, unsigned long long root_dev, int one_fs, totals *t, records *r) {
    names dir;
    open_names(&dir, fd);
    const char *name;
    while ((name = next_name(&dir, &t->list_errno)) != NULL) {
        struct stat st;
        int failed = stat_at(fd, name, &st);
        record item;
        memset(&item, 0, sizeof item);
        if (failed) {
            if (failed == ENOENT || failed == ENOTDIR || failed == ELOOP) continue;
            item.kind = REC_ERROR;
            item.err = failed;
            if (records_add(r, &item, name) != 0) goto out_of_memory;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            if (one_fs && (unsigned long long)st.st_dev != root_dev) continue;
            item.kind = REC_DIR;
            item.dev = (unsigned long long)st.st_dev;
            item.ino = (unsigned long long)st.st_ino;
            if (records_add(r, &item, name) != 0) goto out_of_memory;
            t->dirs++;
        } else if (st.st_nlink > 1) {
            item.kind = REC_LINKED;
            item.dev = (unsigned long long)st.st_dev;
            item.ino = (unsigned long long)st.st_ino;
            item.blocks = (long long)st.st_blocks;
            item.size = (long long)st.st_size;
            item.mtime = time_of(&st.st_mtim);
            if (records_add(r, &item, "") != 0) goto out_of_memory; /* no name needed */
            continue;
        } else {
            t->files++;
        }
        wide_add(&t->blocks, (unsigned long long)st.st_blocks);
        wide_add(&t->size, (unsigned long long)st.st_size);
        double mtime = time_of(&st.st_mtim);
        if (mtime > t->newest) t->newest = mtime;
    }
    close_names(&dir);
    return;
out_of_memory:
    t->oom = 1;
    close_names(&dir);
}

static PyObject *build(const totals *t, const records *r) {
    PyObject *subdirs = PyList_New(0), *linked = PyList_New(0), *errors = PyList_New(0);
    PyObject *blocks = NULL, *size = NULL;
    if (subdirs == NULL || linked == NULL || errors == NULL) goto fail;
    for (size_t i = 0; i < r->count; i++) {
        const record *item = &r->items[i];
        PyObject *entry = NULL;
        if (item->kind == REC_LINKED) {
            entry = Py_BuildValue("(KKLLd)", item->dev, item->ino, item->blocks, item->size,
                                  item->mtime);
        } else {
            PyObject *name = PyUnicode_DecodeFSDefault(r->names.bytes + item->name);
            if (name == NULL) goto fail;
            if (item->kind == REC_DIR)
                entry = Py_BuildValue("(NKK)", name, item->dev, item->ino);
            else
                entry = Py_BuildValue("(Ni)", name, item->err);
        }
        if (entry == NULL) goto fail;
        PyObject *into = item->kind == REC_DIR ? subdirs : item->kind == REC_LINKED ? linked : errors;
        int rc = PyList_Append(into, entry);
        Py_DECREF(entry);
        if (rc != 0) goto fail;
    }
    blocks = wide_to_long(&t->blocks);
    size = wide_to_long(&t->size);
    if (blocks == NULL || size == NULL) goto fail;
    return Py_BuildValue("(NNLLdNNN)", blocks, size, t->files, t->dirs, t->newest, subdirs,
                         linked, errors);
fail:
    Py_XDECREF(blocks);
    Py_XDECREF(size);
    Py_XDECREF(subdirs);
    Py_XDECREF(linked);
    Py_XDECREF(errors);
    return NULL;
}

static PyObject *count_folder(PyObject *self, PyObject *args) {
    int fd, one_fs;
    unsigned long long root_dev;
    (void)self;
    if (!PyArg_ParseTuple(args, "iKp:count_folder", &fd, &root_dev, &one_fs)) return NULL;
    totals t = {{0, 0}, {0, 0}, 0, 0, -HUGE_VAL, 0, 0};
    records r = {NULL, 0, 0, {NULL, 0, 0}};
    Py_BEGIN_ALLOW_THREADS
    count(fd, root_dev, one_fs, &t, &r);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (t.oom)
        PyErr_NoMemory();
    else if (t.list_errno) {
        errno = t.list_errno;
        PyErr_SetFromErrno(PyExc_OSError);
    } else
        result = build(&t, &r);
    free(r.items);
    free(r.names.bytes);
    return result;
}


/* ---- list_folder ---------------------------------------------------------------------- */

typedef struct {
    int err; /* fstatat failed with this errno: no stat below */
    mode_t mode;
    unsigned long long dev, ino, nlink, blocks;
    double atime, mtime;
    size_t name;   /* offsets into the arena */
    ssize_t target; /* -1: no target */
} listed;

typedef struct {
    listed *items;
    size_t count, cap;
    arena text; /* names and link targets */
    int list_errno;
    int oom;
} listing;

/* Runs without the GIL: only system calls and C memory. */
static void list(int fd, listing *l) {
    names dir;
    open_names(&dir, fd);
    char target[PATH_MAX + 1]; /* os.readlink's buffer: at most PATH_MAX bytes are read */
    const char *name;
    while ((name = next_name(&dir, &l->list_errno)) != NULL) {
        if (l->count == l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 64;
            listed *grown = realloc(l->items, cap * sizeof(listed));
            if (grown == NULL) goto out_of_memory;
            l->items = grown;
            l->cap = cap;
        }
        listed *item = &l->items[l->count];
        memset(item, 0, sizeof *item);
        item->target = -1;
        ssize_t at = arena_put(&l->text, name, strlen(name));
        if (at < 0) goto out_of_memory;
        item->name = (size_t)at;
        struct stat st;
        l->count++;
        item->err = stat_at(fd, name, &st);
        if (item->err) continue;
        item->mode = st.st_mode;
        item->dev = (unsigned long long)st.st_dev;
        item->ino = (unsigned long long)st.st_ino;
        item->nlink = (unsigned long long)st.st_nlink;
        item->blocks = (unsigned long long)st.st_blocks;
        item->atime = time_of(&st.st_atim);
        item->mtime = time_of(&st.st_mtim);
        if (S_ISLNK(st.st_mode)) {
            ssize_t length;
            do {
                length = readlinkat(fd, name, target, PATH_MAX);
            } while (length < 0 && errno == EINTR);
            if (length >= 0) {
                item->target = arena_put(&l->text, target, (size_t)length);
                if (item->target < 0) goto out_of_memory;
            }
        }
    }
    close_names(&dir);
    return;
out_of_memory:
    l->oom = 1;
    close_names(&dir);
}

/* rel = prefix + name, as str: the name decoded as os.listdir decodes it */
static PyObject *rel_of(PyObject *prefix, PyObject *name) {
    return PyUnicode_GET_LENGTH(prefix) ? PyUnicode_Concat(prefix, name) : Py_NewRef(name);
}

/* st_blocks * block_unit, as Python's ints multiply them (no wrap past 64 bits) */
static PyObject *allocated_of(unsigned long long blocks, unsigned long long unit,
                              PyObject *unit_obj) {
    if (unit == 0 || blocks <= ULLONG_MAX / unit) return PyLong_FromUnsignedLongLong(blocks * unit);
    PyObject *wide_blocks = PyLong_FromUnsignedLongLong(blocks);
    if (wide_blocks == NULL) return NULL;
    PyObject *product = PyNumber_Multiply(wide_blocks, unit_obj);
    Py_DECREF(wide_blocks);
    return product;
}

static PyObject *make_one(const listing *l, const listed *item, PyObject *name, PyObject *prefix,
                          PyObject *make, unsigned long long unit, PyObject *unit_obj) {
    PyObject *rel = rel_of(prefix, name), *size = NULL, *atime = NULL, *mtime = NULL,
             *inode = NULL, *nlink = NULL, *target = NULL, *entry = NULL;
    if (rel == NULL) goto done;
    size = allocated_of(item->blocks, unit, unit_obj);
    atime = PyFloat_FromDouble(item->atime);
    mtime = PyFloat_FromDouble(item->mtime);
    inode = Py_BuildValue("(KK)", item->dev, item->ino);
    nlink = PyLong_FromUnsignedLongLong(item->nlink);
    if (size == NULL || atime == NULL || mtime == NULL || inode == NULL || nlink == NULL)
        goto done;
    if (item->target >= 0) {
        target = PyUnicode_DecodeFSDefault(l->text.bytes + item->target);
        if (target == NULL) goto done;
    } else {
        target = Py_NewRef(Py_None);
    }
    PyObject *args[10] = {
        rel,
        S_ISDIR(item->mode) ? Py_True : Py_False,
        S_ISLNK(item->mode) ? Py_True : Py_False,
        S_ISREG(item->mode) ? Py_True : Py_False,
        size, atime, mtime, inode, nlink, target,
    };
    entry = PyObject_Vectorcall(make, args, 10, NULL);
done:
    Py_XDECREF(rel);
    Py_XDECREF(size);
    Py_XDECREF(atime);
    Py_XDECREF(mtime);
    Py_XDECREF(inode);
    Py_XDECREF(nlink);
    Py_XDECREF(target);
    return entry;
}

static PyObject *build_listing(const listing *l, PyObject *prefix, PyObject *make,
                               unsigned long long unit, PyObject *unit_obj) {
    PyObject *entries = PyList_New(0), *subdirs = PyList_New(0), *errors = PyList_New(0);
    if (entries == NULL || subdirs == NULL || errors == NULL) goto fail;
    for (size_t i = 0; i < l->count; i++) {
        const listed *item = &l->items[i];
        PyObject *name = PyUnicode_DecodeFSDefault(l->text.bytes + item->name), *made;
        if (name == NULL) goto fail;
        if (item->err) {
            made = Py_BuildValue("(Ni)", name, item->err);
            if (made == NULL || PyList_Append(errors, made) != 0) {
                Py_XDECREF(made);
                goto fail;
            }
            Py_DECREF(made);
            continue;
        }
        PyObject *entry = make_one(l, item, name, prefix, make, unit, unit_obj);
        if (entry == NULL || PyList_Append(entries, entry) != 0) {
            Py_DECREF(name);
            Py_XDECREF(entry);
            goto fail;
        }
        if (S_ISDIR(item->mode)) {
            made = PyTuple_Pack(2, name, entry);
            if (made == NULL || PyList_Append(subdirs, made) != 0) {
                Py_DECREF(name);
                Py_DECREF(entry);
                Py_XDECREF(made);
                goto fail;
            }
            Py_DECREF(made);
        }
        Py_DECREF(name);
        Py_DECREF(entry);
    }
    return Py_BuildValue("(NNN)", entries, subdirs, errors);
fail:
    Py_XDECREF(entries);
    Py_XDECREF(subdirs);
    Py_XDECREF(errors);
    return NULL;
}

static PyObject *list_folder(PyObject *self, PyObject *args) {
    int fd;
    PyObject *prefix, *make, *unit_obj;
    (void)self;
    if (!PyArg_ParseTuple(args, "iUOO!:list_folder", &fd, &prefix, &make, &PyLong_Type, &unit_obj))
        return NULL;
    unsigned long long unit = PyLong_AsUnsignedLongLong(unit_obj); /* a negative one raises */
    if (unit == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (!PyCallable_Check(make)) {
        PyErr_SetString(PyExc_TypeError, "list_folder: make_entry must be callable");
        return NULL;
    }
    listing l = {NULL, 0, 0, {NULL, 0, 0}, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    list(fd, &l);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (l.oom)
        PyErr_NoMemory();
    else if (l.list_errno) {
        errno = l.list_errno;
        PyErr_SetFromErrno(PyExc_OSError);
    } else
        result = build_listing(&l, prefix, make, unit, unit_obj);
    free(l.items);
    free(l.text.bytes);
    return result;
}

static PyMethodDef methods[] = {
    {"count_folder", count_folder, METH_VARARGS,
     "count_folder(fd, root_dev, one_file_system) -> (blocks, size, files, dirs, newest, "
     "subdirs, linked, errors): one folder's entries, fstatat-ed relative to fd."},
    {"list_folder", list_folder, METH_VARARGS,
     "list_folder(fd, prefix, make_entry, block_unit) -> (entries, subdirs, errors): one "
     "folder's entries, fstatat-ed relative to fd, each made by make_entry."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "The per-entry loops of the measuring walk and the unit listing in C (see _native.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", ABI) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
