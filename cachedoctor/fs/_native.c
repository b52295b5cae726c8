/* cachedoctor.fs._native: the measuring walk's per-entry loop, in C.
 *
 * Why: `scan --path` spends the kernel's time in getdents64 and fstatat, the same as du;
 * in Python every entry also costs a str, an os.stat_result (with its float and nanosecond
 * times) and a few bytecodes, which made the scan use 1.6x du's CPU. Here a folder is listed
 * and every entry fstatat-ed relative to the folder's descriptor with no Python object made
 * for a plain file: only subfolders, hard-linked files (nlink > 1) and failures come back.
 * The GIL is released while the system calls run, so a progress thread keeps drawing.
 *
 * It counts exactly as cachedoctor/walker.py's Python loop (`_Measure._count`), which stays
 * as the fallback and as the reference the tests hold this to (tests/test_walker_native.py).
 * Read-only: it lists and stats, nothing else.
 *
 * count_folder(fd, root_dev, one_file_system) ->
 *     (blocks, size, files, dirs, newest, subdirs, linked, errors)
 *   blocks, size  st_blocks and st_size of every entry counted here (plain files and folders)
 *   files, dirs   how many of each were counted here
 *   newest        the largest st_mtime among them, as float (-inf when none)
 *   subdirs       [(name, st_dev, st_ino)] folders to walk (on another device with
 *                 one_file_system: left out and not counted, as du -x does)
 *   linked        [(st_dev, st_ino, st_blocks, st_size, st_mtime)] non-folders with nlink > 1,
 *                 not counted: the caller counts each inode once
 *   errors        [(name, errno)] entries whose fstatat failed, except ENOENT, ENOTDIR and
 *                 ELOOP (gone since the listing: they take no space)
 * A folder that cannot be listed raises OSError, as os.listdir(fd) does. The descriptor's
 * offset is left at the start, as os.listdir(fd) leaves it. ABI (a module constant) changes
 * whenever this signature or the result's shape does: the caller refuses a module built from
 * another version of this file (a stale build in a source tree).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define ABI 2

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
    char *names;
    size_t used, room;
} records;

static int records_add(records *r, const record *item, const char *name) {
    size_t len = strlen(name) + 1;
    if (r->count == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        record *grown = realloc(r->items, cap * sizeof(record));
        if (grown == NULL) return -1;
        r->items = grown;
        r->cap = cap;
    }
    if (r->used + len > r->room) {
        size_t room = r->room ? r->room * 2 : 4096;
        while (room < r->used + len) room *= 2;
        char *grown = realloc(r->names, room);
        if (grown == NULL) return -1;
        r->names = grown;
        r->room = room;
    }
    memcpy(r->names + r->used, name, len);
    r->items[r->count] = *item;
    r->items[r->count].name = r->used;
    r->used += len;
    r->count++;
    return 0;
}

/* st_mtime as os.stat computes it (CPython's fill_time: sec + nsec * 1e-9), bit for bit;
 * st_mtim is Linux's name (hatch_build.py builds this on Linux only) */
static double mtime_of(const struct stat *st) {
    return (double)st->st_mtim.tv_sec + (double)st->st_mtim.tv_nsec * 1e-9;
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
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0); /* as os.listdir's dup: not inherited */
    if (copy < 0) {
        t->list_errno = errno;
        return;
    }
    DIR *dir = fdopendir(copy);
    if (dir == NULL) {
        t->list_errno = errno;
        close(copy);
        return;
    }
    rewinddir(dir); /* the descriptor's offset is shared with the caller's: start at 0 */
    for (;;) {
        errno = 0;
        struct dirent *entry = readdir(dir);
        if (entry == NULL) {
            if (errno != 0) t->list_errno = errno;
            break;
        }
        const char *name = entry->d_name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
        struct stat st;
        int rc;
        do {
            rc = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW);
        } while (rc != 0 && errno == EINTR);
        record item;
        memset(&item, 0, sizeof item);
        if (rc != 0) {
            if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue;
            item.kind = REC_ERROR;
            item.err = errno;
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
            item.mtime = mtime_of(&st);
            if (records_add(r, &item, "") != 0) goto out_of_memory; /* no name needed */
            continue;
        } else {
            t->files++;
        }
        wide_add(&t->blocks, (unsigned long long)st.st_blocks);
        wide_add(&t->size, (unsigned long long)st.st_size);
        double mtime = mtime_of(&st);
        if (mtime > t->newest) t->newest = mtime;
    }
    rewinddir(dir); /* leave the shared offset where os.listdir(fd) leaves it */
    closedir(dir);
    return;
out_of_memory:
    t->oom = 1;
    rewinddir(dir);
    closedir(dir);
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
            PyObject *name = PyUnicode_DecodeFSDefault(r->names + item->name);
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
    records r = {NULL, 0, 0, NULL, 0, 0};
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
    free(r.names);
    return result;
}

static PyMethodDef methods[] = {
    {"count_folder", count_folder, METH_VARARGS,
     "count_folder(fd, root_dev, one_file_system) -> (blocks, size, files, dirs, newest, "
     "subdirs, linked, errors): one folder's entries, fstatat-ed relative to fd."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native",
    "The measuring walk's per-entry loop in C (see cachedoctor/fs/_native.c).", -1, methods,
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
