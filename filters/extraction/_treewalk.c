/* The additive trees' walk of ``trees.Forest.decision`` in C: each row of a float32 feature
 * matrix down every tree, the leaves' values summed in tree order.
 *
 * The numpy walk takes one gather per tree level over all (tree, row) pairs: on a page of a
 * few hundred blocks and a hundred trees, numpy's per-call cost and the index arrays are
 * most of what it spends (0.5 ms a page on the gold sets). Here the same walk runs in plain
 * loops, a few dozen rows down one tree at a time. The arrays are those of ``Forest._flat`` (a node's children
 * at ``2 * id`` and ``2 * id + 1`` of one array; a leaf's children are itself), so the two
 * walks compare the same float32 values and add the same doubles in the same order: their
 * outputs are equal bit for bit (a test checks it on real pages).
 *
 * Python's headers only; arrays come in through the buffer protocol. Optional in the build:
 * without a compiler the numpy walk runs, with the same output.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static int take(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t items, Py_ssize_t size,
                const char *name) {
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->len != items * size) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, expected %zd items of %zd bytes", name,
                     view->len, items, size);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *py_decision(PyObject *Py_UNUSED(self), PyObject *args) {
    PyObject *o_feature, *o_threshold, *o_children, *o_value, *o_x, *o_out;
    Py_ssize_t n_trees, width, rows, n_features, depth;
    double base;
    if (!PyArg_ParseTuple(args, "OOOOOOnnnnnd", &o_feature, &o_threshold, &o_children, &o_value,
                          &o_x, &o_out, &n_trees, &width, &rows, &n_features, &depth, &base))
        return NULL;
    if (n_trees < 0 || width < 1 || rows < 0 || n_features < 1 || depth < 0) {
        PyErr_SetString(PyExc_ValueError, "decision: bad sizes");
        return NULL;
    }
    Py_ssize_t nodes = n_trees * width;
    Py_buffer feature, threshold, children, value, x, out;
    int bad = 0;
    if (take(o_feature, &feature, 0, nodes, sizeof(int32_t), "feature") < 0) return NULL;
    if (take(o_threshold, &threshold, 0, nodes, sizeof(float), "threshold") < 0) goto f1;
    if (take(o_children, &children, 0, 2 * nodes, sizeof(int32_t), "children") < 0) goto f2;
    if (take(o_value, &value, 0, nodes, sizeof(double), "value") < 0) goto f3;
    if (take(o_x, &x, 0, rows * n_features, sizeof(float), "x") < 0) goto f4;
    if (take(o_out, &out, 1, rows, sizeof(double), "out") < 0) goto f5;

    const int32_t *feat = feature.buf, *child = children.buf;
    const float *thr = threshold.buf, *xs = x.buf;
    const double *val = value.buf;
    double *res = out.buf;
    /* Indices are checked once, before the walk: a corrupt model file is an error, not a
     * read outside the arrays. */
    for (Py_ssize_t i = 0; i < nodes && !bad; i++)
        bad = feat[i] < 0 || feat[i] >= n_features || child[2 * i] < 0 || child[2 * i] >= nodes
              || child[2 * i + 1] < 0 || child[2 * i + 1] >= nodes;
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "decision: a node index is out of range");
    } else {
        Py_BEGIN_ALLOW_THREADS
        /* Tree by tree, a chunk of rows at a time, level by level: the rows' walks are
         * independent, so their loads overlap (one row at a time waits on each load). Each
         * row still adds its trees' values in tree order. */
        enum { CHUNK = 32 };
        int32_t node[CHUNK];
        for (Py_ssize_t r = 0; r < rows; r++) res[r] = 0.0;
        for (Py_ssize_t t = 0; t < n_trees; t++) {
            for (Py_ssize_t r0 = 0; r0 < rows; r0 += CHUNK) {
                Py_ssize_t m = rows - r0 < CHUNK ? rows - r0 : CHUNK;
                const float *x0 = xs + r0 * n_features;
                for (Py_ssize_t i = 0; i < m; i++) node[i] = (int32_t)(t * width);
                for (Py_ssize_t level = 0; level < depth; level++)
                    for (Py_ssize_t i = 0; i < m; i++) {
                        int32_t k = node[i];
                        node[i] = child[2 * k + (x0[i * n_features + feat[k]] > thr[k])];
                    }
                for (Py_ssize_t i = 0; i < m; i++) res[r0 + i] += val[node[i]];
            }
        }
        for (Py_ssize_t r = 0; r < rows; r++) res[r] = base + res[r];
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&out);
f5: PyBuffer_Release(&x);
f4: PyBuffer_Release(&value);
f3: PyBuffer_Release(&children);
f2: PyBuffer_Release(&threshold);
f1: PyBuffer_Release(&feature);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decision", py_decision, METH_VARARGS,
     "decision(feature, threshold, children, value, x, out, trees, width, rows, features, depth, base):"
     " every row of x down every tree, base + the leaves' sum written to out."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_treewalk",
                                    "The additive trees' walk in C (trees.Forest.decision).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__treewalk(void) { return PyModule_Create(&module); }
