/* The records of a RecordBatch v2 walked in C: the compiled path of
 * logbus.records.validation (its numpy path is the fallback when this extension is not
 * built). One function, check_section, reads every record of an uncompressed records
 * section exactly as the reference decoder (logbus.records.record.decode_record) does:
 *
 *   length varint, attributes, timestampDelta varlong, offsetDelta varint, key and value
 *   (varint length, -1 for null, then bytes), header count varint, then each header's
 *   key (varint length >= 0) and value (varint length, -1 for null).
 *
 * and accepts the section only if it holds exactly `count` such records filling it, with
 * offset deltas 0, 1, ..., count-1. Varints are zigzag: a 32-bit one takes at most 5
 * bytes (the fifth at most 0x0F), a 64-bit one at most 10 (the tenth at most 0x01).
 *
 * A field is read only within its record: the reference decoder may read past a
 * record's end, but a record whose fields do not end exactly at its end is refused
 * either way, so both refuse the same records.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#define MIN_RECORD_BODY 6

/* Reads the zigzag varint at *p (before `end`) of at most `max_bytes` bytes whose last
 * byte may be at most `top`; 0 if it is malformed or runs into `end`. */
static inline int
read_zigzag(const uint8_t *b, Py_ssize_t *p, Py_ssize_t end, int max_bytes, uint8_t top,
            int64_t *out)
{
    Py_ssize_t at = *p;
    if (at >= end) {
        return 0;
    }
    uint8_t c = b[at];
    if (c < 0x80) {
        *out = (int64_t)(c >> 1) ^ -(int64_t)(c & 1);
        *p = at + 1;
        return 1;
    }
    uint64_t raw = c & 0x7F;
    for (int k = 1; k < max_bytes; k++) {
        if (at + k >= end) {
            return 0;
        }
        c = b[at + k];
        if (k == max_bytes - 1) {
            if (c > top) {
                return 0;
            }
        }
        raw |= (uint64_t)(c & 0x7F) << (7 * k);
        if (c < 0x80) {
            *out = (int64_t)((raw >> 1) ^ (~(raw & 1) + 1));
            *p = at + k + 1;
            return 1;
        }
    }
    return 0;
}

#define VARINT(p, end, out) read_zigzag(b, (p), (end), 5, 0x0F, (out))
#define VARLONG(p, end, out) read_zigzag(b, (p), (end), 10, 0x01, (out))

/* A key, value or header value at *p: a length (-1: null) and that many bytes. */
static inline int
skip_bytes(const uint8_t *b, Py_ssize_t *p, Py_ssize_t end, int64_t *length)
{
    if (!VARINT(p, end, length)) {
        return 0;
    }
    if (*length >= 0) {
        if (*length > end - *p) {
            return 0;
        }
        *p += (Py_ssize_t)*length;
        return 1;
    }
    return *length == -1;
}

typedef struct {
    Py_ssize_t bad;   /* index of the first bad record, or -1 */
    Py_ssize_t pos;   /* where it starts (or where the bytes after the records start) */
    int64_t low;      /* smallest timestamp delta */
    int64_t high;     /* largest timestamp delta */
    int64_t *keyless; /* indexes of records with a null key (when asked for) */
    Py_ssize_t keyless_count;
    int out_of_memory;
} walk_result;

static void
walk(const uint8_t *b, Py_ssize_t n, Py_ssize_t count, int want_keyless, walk_result *r)
{
    Py_ssize_t p = 0, start = 0, i = 0, capacity = 0, keyless_count = 0;
    int64_t low = INT64_MAX, high = INT64_MIN;
    int64_t *keyless = NULL;
    r->out_of_memory = 0;
    for (; i < count; i++) {
        int64_t length, delta, offset, size, headers;
        start = p;
        if (!VARINT(&p, n, &length) || length < MIN_RECORD_BODY || length > n - p) {
            goto bad;
        }
        Py_ssize_t end = p + (Py_ssize_t)length;
        p += 1; /* attributes: no bit is in use, every value is read the same way */
        if (!VARLONG(&p, end, &delta) || !VARINT(&p, end, &offset) || offset != i) {
            goto bad;
        }
        if (!skip_bytes(b, &p, end, &size)) {
            goto bad;
        }
        if (size == -1 && want_keyless) {
            if (keyless_count == capacity) {
                Py_ssize_t grown = capacity ? 2 * capacity : 256;
                int64_t *more = realloc(keyless, (size_t)grown * sizeof(int64_t));
                if (more == NULL) {
                    r->out_of_memory = 1;
                    goto bad;
                }
                keyless = more;
                capacity = grown;
            }
            keyless[keyless_count++] = i;
        }
        if (!skip_bytes(b, &p, end, &size)) {
            goto bad;
        }
        if (!VARINT(&p, end, &headers) || headers < 0) {
            goto bad;
        }
        for (int64_t h = 0; h < headers; h++) {
            /* each header takes at least two bytes: the loop ends at the record's end */
            if (!VARINT(&p, end, &size) || size < 0 || size > end - p) {
                goto bad;
            }
            p += (Py_ssize_t)size;
            if (!skip_bytes(b, &p, end, &size)) {
                goto bad;
            }
        }
        if (p != end) {
            goto bad;
        }
        low = delta < low ? delta : low;
        high = delta > high ? delta : high;
    }
    start = p;
    if (p != n) {
        goto bad; /* bytes follow the last record: bad is `count` */
    }
    r->bad = -1;
    r->pos = p;
    r->low = low;
    r->high = high;
    r->keyless = keyless;
    r->keyless_count = keyless_count;
    return;
bad:
    r->bad = i;
    r->pos = start;
    r->keyless = keyless;
    r->keyless_count = 0;
}

PyDoc_STRVAR(check_section_doc,
"check_section(data, count, want_keyless, /)\n--\n\n"
"Walk the `count` records of the uncompressed records section `data` (any contiguous\n"
"buffer). Returns (bad, a, b, keyless): when every record is one the reference decoder\n"
"reads, with offset deltas 0..count-1, and they fill `data` exactly, bad is -1, a and b\n"
"are the smallest and largest timestamp delta and keyless the indexes of the records\n"
"whose key is null (a list when `want_keyless`, else None). Otherwise bad is the index\n"
"of the first bad record (`count`: bytes follow the last record) and a where it starts.");

static PyObject *
check_section(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "check_section takes 3 arguments");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (count < 1) {
        PyErr_SetString(PyExc_ValueError, "count must be positive");
        return NULL;
    }
    int want_keyless = PyObject_IsTrue(args[2]);
    if (want_keyless < 0) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    walk_result r;
    if (view.len >= (1 << 16)) {
        /* the buffer is exported: it cannot be resized or freed while the GIL is away */
        Py_BEGIN_ALLOW_THREADS
        walk((const uint8_t *)view.buf, view.len, count, want_keyless, &r);
        Py_END_ALLOW_THREADS
    } else {
        walk((const uint8_t *)view.buf, view.len, count, want_keyless, &r);
    }
    PyBuffer_Release(&view);
    if (r.out_of_memory) {
        free(r.keyless);
        return PyErr_NoMemory();
    }
    if (r.bad >= 0) {
        free(r.keyless);
        return Py_BuildValue("(nnnO)", r.bad, r.pos, (Py_ssize_t)0, Py_None);
    }
    PyObject *keyless;
    if (want_keyless) {
        keyless = PyList_New(r.keyless_count);
        if (keyless == NULL) {
            free(r.keyless);
            return NULL;
        }
        for (Py_ssize_t k = 0; k < r.keyless_count; k++) {
            PyObject *index = PyLong_FromLongLong(r.keyless[k]);
            if (index == NULL) {
                Py_DECREF(keyless);
                free(r.keyless);
                return NULL;
            }
            PyList_SET_ITEM(keyless, k, index);
        }
    } else {
        keyless = Py_NewRef(Py_None);
    }
    free(r.keyless);
    return Py_BuildValue("(nLLN)", (Py_ssize_t)-1, (long long)r.low, (long long)r.high,
                         keyless);
}

static PyMethodDef methods[] = {
    {"check_section", (PyCFunction)(void (*)(void))check_section, METH_FASTCALL,
     check_section_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "logbus.records._validate",
    .m_doc = "The records of a RecordBatch v2 walked in C (see logbus.records.validation).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__validate(void)
{
    return PyModuleDef_Init(&module);
}
