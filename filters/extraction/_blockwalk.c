/* The block extractor's DOM walk in C: the same blocks as the Python walk in blocks.py.
 *
 * Why: the walk is about half of the block extractor's time in Python (a node object per
 * DOM node, a property call per tag and text). Here it runs over lexbor's nodes directly,
 * through the functions selectolax's own extension exports (lexbor's "_noi" accessors and
 * a few DOM calls), found with dlsym in that already-loaded library: no lexbor headers
 * are needed to build this file, only Python's. Everything that decides a block (which
 * tags skip, start a block or count as a link; which class names mark a context; what
 * hides an element) is handed in from blocks.py, so the two walks cannot drift apart in
 * their rules; tests/unit/extraction compares their output page by page.
 *
 * set_name_rules(blocks.NAME_RULES) once, then
 * walk(root, document, node ids, categories, name_marks, hidden_style, n_context) returns the walk's
 * lists (texts, kinds, depths, link chars, contexts and nearest depths as flat int16 bytearrays, parents, pre flags,
 * container parent/depth/first/last) or None when the page nests deeper than the Python
 * walk reads element by element (blocks.MAX_DEPTH): the caller then walks it in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef void node_t;
typedef uintptr_t tag_id_t;

static node_t *(*first_child)(node_t *);
static node_t *(*next_sibling)(node_t *);
static tag_id_t (*tag_id_of)(node_t *);
static unsigned int (*node_type)(node_t *);
static const unsigned char *(*qualified_name)(node_t *, size_t *);
static unsigned char *(*text_content)(node_t *, size_t *);
static void *(*destroy_text)(void *, unsigned char *);
/* lexbor returns C bool here: declared so, or the caller would read bits the callee never set. */
static bool (*has_attributes)(node_t *);
static bool (*has_attribute)(node_t *, const unsigned char *, size_t);
static const unsigned char *(*get_attribute)(node_t *, const unsigned char *, size_t, size_t *);
static int bound = 0;

#define MAX_DEPTH_DEFAULT 200
#define MAX_CONTEXT 32
#define NODE_ELEMENT 1 /* lexbor's LXB_DOM_NODE_TYPE_ELEMENT, the DOM's ELEMENT_NODE */

/* Tag categories (the values blocks.py hands in, per tag name). */
enum { CAT_OTHER = 0, CAT_SKIP = 1, CAT_BR = 2, CAT_A = 3, CAT_BLOCK = 4 };

/* A growing run of int16 values: the per-block context counters and nearest depths, handed
 * back as one bytearray each (numpy reads it as it is; a Python int per value cost more than
 * the walk's own work on them). */
typedef struct {
    int16_t *data;
    Py_ssize_t len, cap;
} Shorts;

static int push_short(Shorts *b, long value) {
    if (b->len == b->cap) {
        Py_ssize_t cap = b->cap ? 2 * b->cap : 1024;
        int16_t *data = PyMem_Realloc(b->data, (size_t)cap * sizeof(int16_t));
        if (data == NULL) { PyErr_NoMemory(); return -1; }
        b->data = data;
        b->cap = cap;
    }
    b->data[b->len++] = (int16_t)value;
    return 0;
}

static PyObject *shorts_bytearray(const Shorts *b) {
    return PyByteArray_FromStringAndSize((const char *)b->data, b->len * (Py_ssize_t)sizeof(int16_t));
}

typedef struct {
    PyObject *texts, *kinds, *depths, *links, *parents, *pres;
    Shorts contexts, nearests;
    PyObject *el_parent, *el_depth, *el_first, *el_last;
    PyObject *parts;      /* the text gathered since the last block boundary */
    Py_ssize_t part_links;
    int ctx[MAX_CONTEXT];
    long near[MAX_CONTEXT]; /* per counter, the depth of the innermost element raising it */
    int n_context;
    long open, kind, link_depth, pre;
    int show_hidden, max_depth, too_deep;
    tag_id_t text_id, comment_id, doctype_id;
    void *document;
    PyObject *categories, *name_marks, *hidden_style, *empty;
} Walk;

static int append_long(PyObject *list, long value) {
    PyObject *v = PyLong_FromLong(value);
    if (v == NULL) return -1;
    int rc = PyList_Append(list, v);
    Py_DECREF(v);
    return rc;
}

/* Whether every character of s is whitespace as str.isspace() reads it (and s non-empty). */
static int is_space_only(PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (n == 0) return 0;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i))) return 0;
    return 1;
}

/* len(s.strip()) */
static Py_ssize_t stripped_length(PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), a = 0, b = n;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    while (a < b && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, a))) a++;
    while (b > a && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, b - 1))) b--;
    return b - a;
}

/* A C string decoded as selectolax decodes it (UTF-8, up to the first NUL). */
static PyObject *decode(const unsigned char *s) {
    return PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)strlen((const char *)s), NULL);
}

static int flush(Walk *w, long depth) {
    Py_ssize_t n = PyList_GET_SIZE(w->parts);
    if (n == 0) return 0;
    PyObject *raw = PyUnicode_Join(w->empty, w->parts);
    if (raw == NULL) return -1;
    if (PyList_SetSlice(w->parts, 0, n, NULL) < 0) { Py_DECREF(raw); return -1; }
    Py_ssize_t links = w->part_links;
    w->part_links = 0;
    if (PyUnicode_GET_LENGTH(raw) == 0 || is_space_only(raw)) { Py_DECREF(raw); return 0; }
    int rc = PyList_Append(w->texts, raw);
    Py_DECREF(raw);
    if (rc < 0 || append_long(w->kinds, w->kind) < 0 || append_long(w->depths, depth) < 0
        || append_long(w->links, (long)links) < 0 || append_long(w->parents, w->open) < 0
        || append_long(w->pres, w->pre > 0) < 0)
        return -1;
    for (int i = 0; i < w->n_context; i++)
        if (push_short(&w->contexts, w->ctx[i]) < 0 || push_short(&w->nearests, w->near[i]) < 0) return -1;
    return 0;
}

/* The category code of an element (blocks.py's table), 0 when its name is not in it. */
static long category(Walk *w, node_t *node) {
    size_t len = 0;
    const unsigned char *name = qualified_name(node, &len);
    if (name == NULL) return CAT_OTHER;
    PyObject *tag = decode(name);
    if (tag == NULL) return -1;
    PyObject *code = PyDict_GetItemWithError(w->categories, tag);
    Py_DECREF(tag);
    if (code == NULL) return PyErr_Occurred() ? -1 : CAT_OTHER;
    return PyLong_AsLong(code);
}

/* An attribute's value as str, or NULL with no error when absent or valueless. */
static PyObject *attribute(node_t *node, const char *name) {
    size_t len = 0;
    const unsigned char *value = get_attribute(node, (const unsigned char *)name, strlen(name), &len);
    if (value == NULL) return NULL;
    return decode(value);
}

static int truthy(PyObject *s) { return s != NULL && PyUnicode_GET_LENGTH(s) > 0; }

/* blocks._streamed_segment: "S:" followed by one or more digits (str.isdigit). */
static int streamed_segment(PyObject *ident) {
    if (!truthy(ident)) return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(ident);
    int kind = PyUnicode_KIND(ident);
    const void *data = PyUnicode_DATA(ident);
    if (n < 3 || PyUnicode_READ(kind, data, 0) != 'S' || PyUnicode_READ(kind, data, 1) != ':') return 0;
    for (Py_ssize_t i = 2; i < n; i++)
        if (!Py_UNICODE_ISDIGIT(PyUnicode_READ(kind, data, i))) return 0;
    return 1;
}

static int contains(PyObject *s, const char *word) {
    PyObject *w = PyUnicode_FromString(word);
    if (w == NULL) return -1;
    int rc = PyUnicode_Contains(s, w);
    Py_DECREF(w);
    return rc;
}

/* The class/id words of blocks.NAME_RULES, set once by set_name_rules(): per rule the context
 * counter it raises, its words (found anywhere) and its tokens (found between characters that
 * are not [a-z0-9]), indexed by first byte. A block element's "class id" in ASCII is matched
 * here, as blocks.name_marks matches it (lower-cased, the same words); a name with any other
 * byte goes to name_marks itself, so Unicode case rules stay Python's. */
#define MAX_RULES 8
#define MAX_WORDS 512
#define MAX_NAME 512
typedef struct { char *text; int len, rule, token; } name_word_t;
static name_word_t name_words[MAX_WORDS];
static int n_name_words = 0, n_rules = 0, rule_context[MAX_RULES];
static int word_start[257];

static void clear_name_rules(void) {
    for (int i = 0; i < n_name_words; i++) PyMem_Free(name_words[i].text);
    n_name_words = n_rules = 0;
    memset(word_start, 0, sizeof word_start);
}

static int by_first_byte(const void *a, const void *b) {
    const name_word_t *x = a, *y = b;
    int d = (unsigned char)x->text[0] - (unsigned char)y->text[0];
    return d ? d : (x->rule != y->rule ? x->rule - y->rule : strcmp(x->text, y->text));
}

static int add_name_word(PyObject *word, int rule, int token) {
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(word, &len);
    if (text == NULL) return -1;
    if (len == 0 || n_name_words >= MAX_WORDS) {
        PyErr_SetString(PyExc_ValueError, "name rule words must be non-empty and at most 512");
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++)
        if ((unsigned char)text[i] >= 0x80 || (text[i] >= 'A' && text[i] <= 'Z')) {
            PyErr_SetString(PyExc_ValueError, "name rule words must be lower-case ASCII");
            return -1;
        }
    char *copy = PyMem_Malloc((size_t)len + 1);
    if (copy == NULL) { PyErr_NoMemory(); return -1; }
    memcpy(copy, text, (size_t)len + 1);
    name_words[n_name_words++] = (name_word_t){copy, (int)len, rule, token};
    return 0;
}

/* set_name_rules(((context, words, tokens), ...)) */
static PyObject *py_set_name_rules(PyObject *self, PyObject *rules) {
    clear_name_rules();
    PyObject *seq = PySequence_Fast(rules, "name rules must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > MAX_RULES) { Py_DECREF(seq); return PyErr_Format(PyExc_ValueError, "at most %d name rules", MAX_RULES); }
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *words, *tokens;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, r), "iOO", &rule_context[r], &words, &tokens)) goto fail;
        PyObject *lists[2] = {words, tokens};
        for (int token = 0; token < 2; token++) {
            PyObject *it = PyObject_GetIter(lists[token]), *word;
            if (it == NULL) goto fail;
            while ((word = PyIter_Next(it)) != NULL) {
                int rc = add_name_word(word, (int)r, token);
                Py_DECREF(word);
                if (rc < 0) { Py_DECREF(it); goto fail; }
            }
            Py_DECREF(it);
            if (PyErr_Occurred()) goto fail;
        }
        n_rules = (int)r + 1;
    }
    Py_DECREF(seq);
    qsort(name_words, (size_t)n_name_words, sizeof name_words[0], by_first_byte);
    for (int c = 0, k = 0; c <= 256; c++) {
        while (k < n_name_words && (unsigned char)name_words[k].text[0] < c) k++;
        word_start[c] = k;
    }
    Py_RETURN_NONE;
fail:
    Py_DECREF(seq);
    clear_name_rules();
    return NULL;
}

static int is_word_byte(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/* The context counters "class id" raises (blocks.name_marks), appended to marks; 1 when done
 * here, 0 when the name is not ASCII (or too long) and name_marks must read it. */
static int ascii_marks(const unsigned char *cls, size_t cls_len, const unsigned char *ident, size_t id_len,
                       int *marks, int *n_marks) {
    unsigned char buf[MAX_NAME];
    size_t n = cls_len + (id_len ? id_len + 1 : 0);
    if (n > MAX_NAME) return 0;
    for (size_t i = 0; i < cls_len; i++) {
        if (cls[i] >= 0x80) return 0;
        buf[i] = (cls[i] >= 'A' && cls[i] <= 'Z') ? cls[i] + 32 : cls[i];
    }
    if (id_len) {
        buf[cls_len] = ' ';
        for (size_t i = 0; i < id_len; i++) {
            if (ident[i] >= 0x80) return 0;
            buf[cls_len + 1 + i] = (ident[i] >= 'A' && ident[i] <= 'Z') ? ident[i] + 32 : ident[i];
        }
    }
    int found[MAX_RULES] = {0}, left = n_rules;
    for (size_t i = 0; i < n && left; i++) {
        for (int k = word_start[buf[i]]; k < word_start[buf[i] + 1]; k++) {
            const name_word_t *w = &name_words[k];
            if (found[w->rule] || i + (size_t)w->len > n || memcmp(buf + i, w->text, (size_t)w->len) != 0) continue;
            if (w->token && ((i > 0 && is_word_byte(buf[i - 1]))
                             || (i + (size_t)w->len < n && is_word_byte(buf[i + (size_t)w->len]))))
                continue;
            found[w->rule] = 1;
            left--;
        }
    }
    for (int r = 0; r < n_rules; r++)
        if (found[r] && *n_marks < MAX_CONTEXT) marks[(*n_marks)++] = rule_context[r];
    return 1;
}

/* marks(names): the counters the C matcher gives a "class id" string (None: not ASCII), for tests. */
static PyObject *py_marks(PyObject *self, PyObject *arg) {
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(arg, &len);
    if (text == NULL) return NULL;
    int marks[MAX_CONTEXT], n_marks = 0;
    if (!ascii_marks((const unsigned char *)text, (size_t)len, NULL, 0, marks, &n_marks)) Py_RETURN_NONE;
    PyObject *out = PyTuple_New(n_marks);
    if (out == NULL) return NULL;
    for (int i = 0; i < n_marks; i++) PyTuple_SET_ITEM(out, i, PyLong_FromLong(marks[i]));
    return out;
}

/* The context counters a block element's class and id raise (blocks.name_marks), appended
 * to marks: matched here when the names are ASCII, else by name_marks. -1 on error. */
static int element_marks(Walk *w, node_t *node, PyObject *ident, int *marks, int *n_marks) {
    size_t len = 0;
    const unsigned char *cls = get_attribute(node, (const unsigned char *)"class", 5, &len);
    const unsigned char *id = truthy(ident) ? get_attribute(node, (const unsigned char *)"id", 2, &len) : NULL;
    /* the bytes up to a NUL, as decode() reads them */
    size_t cls_len = cls ? strlen((const char *)cls) : 0, id_len = id ? strlen((const char *)id) : 0;
    if (n_rules > 0 && ascii_marks(cls ? cls : (const unsigned char *)"", cls_len, id, id_len, marks, n_marks))
        return 0;
    PyObject *names = attribute(node, "class");
    if (names == NULL && PyErr_Occurred()) return -1;
    if (names == NULL) names = PyUnicode_FromString("");
    if (names != NULL && truthy(ident)) {
        PyObject *joined = PyUnicode_FromFormat("%U %U", names, ident);
        Py_DECREF(names);
        names = joined;
    }
    if (names == NULL) return -1;
    if (!truthy(names)) { Py_DECREF(names); return 0; }
    PyObject *found = PyObject_CallOneArg(w->name_marks, names);
    Py_DECREF(names);
    if (found == NULL) return -1;
    PyObject *seq = PySequence_Fast(found, "name_marks must return a sequence");
    Py_DECREF(found);
    if (seq == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n && *n_marks < MAX_CONTEXT; i++)
        marks[(*n_marks)++] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
    Py_DECREF(seq);
    return PyErr_Occurred() ? -1 : 0;
}

static int walk(Walk *w, node_t *node, long depth);

/* blocks._Walk.block. Returns -1 on error, 1 when the page is too deep. */
static int block(Walk *w, node_t *node, long code, long depth) {
    int marks[MAX_CONTEXT + 1];
    int n_marks = 0;
    if (has_attributes(node)) {
        PyObject *ident = attribute(node, "id");
        if (ident == NULL && PyErr_Occurred()) return -1;
        if (!w->show_hidden) {
            int hide = 0;
            if (has_attribute(node, (const unsigned char *)"hidden", 6) && !streamed_segment(ident)) hide = 1;
            if (!hide) {
                PyObject *aria = attribute(node, "aria-hidden");
                if (aria == NULL && PyErr_Occurred()) { Py_XDECREF(ident); return -1; }
                if (aria != NULL) {
                    hide = PyUnicode_CompareWithASCIIString(aria, "true") == 0;
                    Py_DECREF(aria);
                }
            }
            if (!hide) {
                PyObject *style = attribute(node, "style");
                if (style == NULL && PyErr_Occurred()) { Py_XDECREF(ident); return -1; }
                if (truthy(style)) {
                    int a = contains(style, "none"), b = a == 1 ? 1 : contains(style, "hidden");
                    if (a < 0 || b < 0) { Py_DECREF(style); Py_XDECREF(ident); return -1; }
                    if (a || b) {
                        PyObject *r = PyObject_CallOneArg(w->hidden_style, style);
                        if (r == NULL) { Py_DECREF(style); Py_XDECREF(ident); return -1; }
                        hide = PyObject_IsTrue(r);
                        Py_DECREF(r);
                    }
                }
                Py_XDECREF(style);
            }
            if (hide) { Py_XDECREF(ident); return hide < 0 ? -1 : 0; }
        }
        int rc = element_marks(w, node, ident, marks, &n_marks);
        Py_XDECREF(ident);
        if (rc < 0) return -1;
    }
    long kind = ((code >> 4) & 0x3f) - 1, ctx_tag = ((code >> 10) & 0x3f) - 1, pre = (code >> 16) & 1;
    if (ctx_tag >= 0) marks[n_marks++] = (int)ctx_tag;
    if (PyList_GET_SIZE(w->parts) && flush(w, depth) < 0) return -1;
    long outer_near[MAX_CONTEXT + 1];
    for (int i = 0; i < n_marks; i++)
        if (marks[i] >= 0 && marks[i] < w->n_context) {
            w->ctx[marks[i]]++;
            outer_near[i] = w->near[marks[i]];
            w->near[marks[i]] = depth;
        }
    long outer = w->open, outer_kind = w->kind;
    w->open = (long)PyList_GET_SIZE(w->el_parent);
    if (append_long(w->el_parent, outer) < 0 || append_long(w->el_depth, depth) < 0
        || append_long(w->el_first, (long)PyList_GET_SIZE(w->texts)) < 0 || append_long(w->el_last, -1) < 0)
        return -1;
    if (kind >= 0) w->kind = kind;
    w->pre += pre;
    int rc = walk(w, node, depth);
    if (rc != 0) return rc; /* an error, or too deep: the walk is abandoned */
    if (PyList_GET_SIZE(w->parts) && flush(w, depth) < 0) return -1;
    w->pre -= pre;
    PyObject *last = PyLong_FromSsize_t(PyList_GET_SIZE(w->texts));
    if (last == NULL || PyList_SetItem(w->el_last, w->open, last) < 0) return -1;
    w->open = outer;
    w->kind = outer_kind;
    for (int i = n_marks - 1; i >= 0; i--)
        if (marks[i] >= 0 && marks[i] < w->n_context) {
            w->ctx[marks[i]]--;
            w->near[marks[i]] = outer_near[i];
        }
    return 0;
}

/* blocks._Walk.walk. Returns -1 on error, 1 when the page is too deep. */
static int walk(Walk *w, node_t *node, long depth) {
    for (node_t *child = first_child(node); child != NULL; child = next_sibling(child)) {
        tag_id_t id = tag_id_of(child);
        if (id == w->text_id) {
            size_t len = 0;
            unsigned char *raw = text_content(child, &len);
            if (raw == NULL) continue;
            PyObject *text = decode(raw);
            if (w->document != NULL) destroy_text(w->document, raw);
            if (text == NULL) return -1;
            if (PyUnicode_GET_LENGTH(text) && (PyList_GET_SIZE(w->parts) || !is_space_only(text))) {
                if (PyList_Append(w->parts, text) < 0) { Py_DECREF(text); return -1; }
                if (w->link_depth) w->part_links += stripped_length(text);
            }
            Py_DECREF(text);
            continue;
        }
        if (id == w->comment_id) continue;
        /* Only an element has a name to read; any other node (a doctype, the node lexbor
         * makes of "<?php ... ?>") is walked like an unknown tag, as the Python walk does
         * with its name None. */
        long code = node_type(child) == NODE_ELEMENT && id != w->doctype_id ? category(w, child) : CAT_OTHER;
        if (code < 0) return -1;
        int cat = (int)(code & 0xf);
        if (cat == CAT_SKIP) continue;
        if (cat == CAT_BR) {
            PyObject *nl = PyUnicode_FromString("\n");
            if (nl == NULL || PyList_Append(w->parts, nl) < 0) { Py_XDECREF(nl); return -1; }
            Py_DECREF(nl);
            continue;
        }
        if (depth >= w->max_depth) { w->too_deep = 1; return 1; }
        int rc;
        if (cat == CAT_BLOCK) {
            rc = block(w, child, code, depth + 1);
        } else if (cat == CAT_A) {
            w->link_depth++;
            rc = walk(w, child, depth + 1);
            w->link_depth--;
        } else {
            rc = walk(w, child, depth + 1);
        }
        if (rc != 0) return rc;
    }
    return 0;
}

static PyObject *py_bind(PyObject *self, PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) return NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL) lib = dlopen(path, RTLD_NOW);
    if (lib == NULL) return PyErr_Format(PyExc_ImportError, "cannot open %s: %s", path, dlerror());
#define BIND(var, symbol) \
    *(void **)(&var) = dlsym(lib, symbol); \
    if (var == NULL) return PyErr_Format(PyExc_ImportError, "%s does not export %s", path, symbol);
    BIND(first_child, "lxb_dom_node_first_child_noi");
    BIND(next_sibling, "lxb_dom_node_next_noi");
    BIND(tag_id_of, "lxb_dom_node_tag_id_noi");
    BIND(node_type, "lxb_dom_node_type_noi");
    BIND(qualified_name, "lxb_dom_element_qualified_name");
    BIND(text_content, "lxb_dom_node_text_content");
    BIND(destroy_text, "lxb_dom_document_destroy_text_noi");
    BIND(has_attributes, "lxb_dom_element_has_attributes");
    BIND(has_attribute, "lxb_dom_element_has_attribute");
    BIND(get_attribute, "lxb_dom_element_get_attribute");
#undef BIND
    bound = 1;
    Py_RETURN_NONE;
}

static PyObject *py_walk(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"root", "document", "text_id", "comment_id", "doctype_id", "categories", "name_marks",
                               "hidden_style", "n_context", "show_hidden", "max_depth", NULL};
    unsigned long long root, document, text_id, comment_id, doctype_id;
    PyObject *categories, *name_marks, *hidden_style;
    int n_context, show_hidden = 0, max_depth = MAX_DEPTH_DEFAULT;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KKKKKO!OOi|pi", keywords, &root, &document, &text_id,
                                     &comment_id, &doctype_id, &PyDict_Type, &categories, &name_marks, &hidden_style,
                                     &n_context, &show_hidden, &max_depth))
        return NULL;
    if (!bound) return PyErr_Format(PyExc_RuntimeError, "bind() the lexbor library first");
    if (n_context < 0 || n_context > MAX_CONTEXT) return PyErr_Format(PyExc_ValueError, "n_context out of range");
    if (root == 0) return PyErr_Format(PyExc_ValueError, "no root node");
    Walk w;
    memset(&w, 0, sizeof w);
    w.n_context = n_context;
    w.open = -1;
    w.show_hidden = show_hidden;
    w.max_depth = max_depth;
    w.text_id = (tag_id_t)text_id;
    w.comment_id = (tag_id_t)comment_id;
    w.doctype_id = (tag_id_t)doctype_id;
    w.document = (void *)(uintptr_t)document;
    w.categories = categories;
    w.name_marks = name_marks;
    w.hidden_style = hidden_style;
    PyObject **lists[] = {&w.texts, &w.kinds, &w.depths, &w.links, &w.parents, &w.pres,
                          &w.el_parent, &w.el_depth, &w.el_first, &w.el_last, &w.parts};
    const int n_lists = (int)(sizeof lists / sizeof lists[0]);
    PyObject *result = NULL;
    w.empty = PyUnicode_FromString("");
    int ok = w.empty != NULL;
    for (int i = 0; i < n_lists && ok; i++) ok = (*lists[i] = PyList_New(0)) != NULL;
    if (ok) {
        int rc = walk(&w, (node_t *)(uintptr_t)root, 0);
        if (rc == 0) rc = flush(&w, 0);
        if (rc == 0) {
            PyObject *contexts = shorts_bytearray(&w.contexts), *nearests = shorts_bytearray(&w.nearests);
            if (contexts != NULL && nearests != NULL)
                result = PyTuple_Pack(12, w.texts, w.kinds, w.depths, w.links, contexts, nearests, w.parents,
                                      w.pres, w.el_parent, w.el_depth, w.el_first, w.el_last);
            Py_XDECREF(contexts);
            Py_XDECREF(nearests);
        } else if (rc == 1 && !PyErr_Occurred()) {
            result = Py_NewRef(Py_None);
        }
    }
    for (int i = 0; i < n_lists; i++) Py_XDECREF(*lists[i]);
    PyMem_Free(w.contexts.data);
    PyMem_Free(w.nearests.data);
    Py_XDECREF(w.empty);
    return result;
}

static PyMethodDef methods[] = {
    {"bind", py_bind, METH_VARARGS, "Find lexbor's functions in selectolax's extension (its path)."},
    {"set_name_rules", py_set_name_rules, METH_O,
     "The class/id words the walk matches itself: ((context, words, tokens), ...) (see blocks.NAME_RULES)."},
    {"marks", py_marks, METH_O, "The context counters the C matcher gives a class/id string (None: not ASCII)."},
    {"walk", (PyCFunction)(void (*)(void))py_walk, METH_VARARGS | METH_KEYWORDS,
     "The blocks of the subtree under a lexbor node (see blocks.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_blockwalk",
                                    "The block extractor's DOM walk in C (see blocks.py).", -1, methods};

PyMODINIT_FUNC PyInit__blockwalk(void) { return PyModule_Create(&module); }
