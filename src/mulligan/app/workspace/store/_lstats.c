/* _lstats: the stat index's compare, done natively (see statindex.py, walk.py).
 *
 * differ(dirfd, names, skip, count, keys, stride, follow, threads) -> list[int]
 *
 * In: `names`, a buffer of NUL-separated relative paths (bytes as the file system has them);
 * the first `skip` are passed over, the next `count` are stated with fstatat(dirfd, name) --
 * AT_SYMLINK_NOFOLLOW unless `follow` -- with the interpreter lock released, on `threads`
 * threads (contiguous parts, the calling thread takes one), as git's preload-index does.
 * `keys`, a buffer of signed 64-bit integers: path i's recorded (st_mode, st_size,
 * st_mtime_ns, st_ctime_ns, st_ino) are keys[c * stride + i] for c = 0..4 (the index's
 * columns, as they lie in its file).
 * Out: the positions (0..count-1, ascending) of the paths whose stat is not the recorded one,
 * or that could not be stated, or that are absolute. With `follow` (an ignore file, read as
 * git reads it: through a link), a path that is not a regular file, or cannot be stated, has
 * the key (0, 0, 0, 0, 0): "none".
 * Never: one Python object per path, a read of anything but `names` and `keys` within their
 * bounds (a short buffer is a ValueError), a change to the file system.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_THREADS 16

typedef struct {
    int dirfd;
    int follow;
    const char *text;       /* NUL-terminated names, one after the other */
    const Py_ssize_t *at;   /* offset of each name in text */
    const char *keys;       /* the columns' bytes */
    Py_ssize_t stride;
    Py_ssize_t start, end;  /* this part: [start, end) */
    unsigned char *out;     /* 1: differs */
} Part;

static int64_t
ns(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + (int64_t)t.tv_nsec;
}

static void *
run(void *arg)
{
    Part *p = (Part *)arg;
    const int flags = p->follow ? 0 : AT_SYMLINK_NOFOLLOW;
    for (Py_ssize_t i = p->start; i < p->end; i++) {
        const char *name = p->text + p->at[i];
        struct stat st;
        int64_t now[5] = {0, 0, 0, 0, 0};
        int ok = name[0] != '/' && fstatat(p->dirfd, name, &st, flags) == 0;
        if (ok && (!p->follow || S_ISREG(st.st_mode))) {
            now[0] = (int64_t)st.st_mode;
            now[1] = (int64_t)st.st_size;
            now[2] = ns(st.st_mtim);
            now[3] = ns(st.st_ctim);
            now[4] = (int64_t)(uint64_t)st.st_ino;  /* as dump stores it: the same bits */
        } else if (!p->follow) {
            p->out[i] = 1;
            continue;
        }
        unsigned char differs = 0;
        for (int c = 0; c < 5; c++) {
            int64_t was;  /* copied: a slice of the file's bytes need not be aligned */
            memcpy(&was, p->keys + (c * p->stride + i) * 8, 8);
            differs |= now[c] != was;
        }
        p->out[i] = differs;
    }
    return NULL;
}

static PyObject *
differ(PyObject *self, PyObject *args)
{
    int dirfd, follow, threads;
    Py_ssize_t skip, count, stride;
    Py_buffer names, keys;
    (void)self;
    if (!PyArg_ParseTuple(args, "iy*nny*npi", &dirfd, &names, &skip, &count, &keys, &stride,
                          &follow, &threads))
        return NULL;
    PyObject *result = NULL;
    char *text = NULL;
    Py_ssize_t *at = NULL;
    unsigned char *out = NULL;
    if (skip < 0 || count < 0 || stride < count || stride > PY_SSIZE_T_MAX / 64 ||
        keys.len / 8 < 4 * stride + count) {
        PyErr_SetString(PyExc_ValueError, "differ: keys too short for count and stride");
        goto done;
    }
    /* Find the names: the first `skip` passed over, then `count` of them, each ending at a
     * NUL or (the last) at the buffer's end. Offsets, not pointers: nothing past the end. */
    const char *base = (const char *)names.buf;
    Py_ssize_t len = names.len, cur = 0;
    for (Py_ssize_t n = 0; n < skip; n++) {
        const char *nul = cur < len ? memchr(base + cur, 0, (size_t)(len - cur)) : NULL;
        if (nul == NULL) {
            PyErr_SetString(PyExc_ValueError, "differ: fewer names than skip + count");
            goto done;
        }
        cur = nul - base + 1;
    }
    const Py_ssize_t first = cur;
    at = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(count ? count : 1));
    if (at == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t n = 0; n < count; n++) {
        if (cur > len) {
            PyErr_SetString(PyExc_ValueError, "differ: fewer names than skip + count");
            goto done;
        }
        at[n] = cur - first;
        const char *nul = cur < len ? memchr(base + cur, 0, (size_t)(len - cur)) : NULL;
        cur = nul != NULL ? nul - base + 1 : len + 1;  /* len + 1: the buffer ended it */
    }
    Py_ssize_t used = (cur > len ? len : cur) - first;
    text = PyMem_Malloc((size_t)used + 1);  /* a copy, NUL-terminated at the end too */
    out = PyMem_Calloc((size_t)(count ? count : 1), 1);
    if (text == NULL || out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(text, base + first, (size_t)used);
    text[used] = 0;

    if (threads < 1)
        threads = 1;
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    if (threads > count)
        threads = count ? (int)count : 1;
    Part parts[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int t = 0; t < threads; t++) {
        parts[t] = (Part){dirfd, follow, text, at, (const char *)keys.buf, stride,
                          count * t / threads, count * (t + 1) / threads, out};
    }
    Py_BEGIN_ALLOW_THREADS
    for (int t = 1; t < threads; t++)
        started[t] = pthread_create(&ids[t], NULL, run, &parts[t]) == 0;
    run(&parts[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t])
            pthread_join(ids[t], NULL);
        else
            run(&parts[t]);  /* no thread to be had: this one does that part too */
    }
    Py_END_ALLOW_THREADS

    result = PyList_New(0);
    if (result == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!out[i])
            continue;
        PyObject *n = PyLong_FromSsize_t(i);
        if (n == NULL || PyList_Append(result, n) < 0) {
            Py_XDECREF(n);
            Py_CLEAR(result);
            goto done;
        }
        Py_DECREF(n);
    }
done:
    PyMem_Free(text);
    PyMem_Free(at);
    PyMem_Free(out);
    PyBuffer_Release(&names);
    PyBuffer_Release(&keys);
    return result;
}

static PyMethodDef methods[] = {
    {"differ", differ, METH_VARARGS,
     "differ(dirfd, names, skip, count, keys, stride, follow, threads) -> list[int]: the "
     "positions of the paths whose stat is not the recorded one (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lstats",
    "The stat index's compare, done natively: fstatat of every path on threads, the "
    "interpreter lock released, only the paths that differ returned.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__lstats(void)
{
    return PyModule_Create(&module);
}
