// Forms generated from JSON Schema: a tool's inputSchema, an elicitation's
// requestedSchema. Supported: string (with format and enum), number,
// integer, boolean, enum (select), nested object (fieldset), array (a list
// with add/remove), required properties and defaults. What it cannot
// represent (oneOf, $ref, ...) becomes a JSON textarea for that property.
import { h, uid } from './dom.js';

/** FormError is a value that does not fit its schema; path says where. */
export class FormError extends Error {
  /**
   * @param {string} path e.g. "owner.name"
   * @param {string} message
   */
  constructor(path, message) {
    super(path ? `${path}: ${message}` : message);
    this.name = 'FormError';
    this.path = path;
  }
}

/**
 * labelRow returns a label whose text is exactly name (the accessible name
 * of the input), followed by a required marker outside the label.
 * @param {string} forId
 * @param {string} name
 * @param {boolean} [required]
 */
export function labelRow(forId, name, required = false) {
  return h('div', { class: 'label-row' }, h('label', { for: forId, text: name }), required ? h('span', { class: 'req', 'aria-hidden': 'true', title: 'required', text: '*' }) : null);
}

/**
 * typeOf returns the schema's single type: the first non-null of a type
 * array, "string" for an enum of strings, "object" when properties are
 * given, else undefined.
 * @param {any} schema
 */
export function typeOf(schema) {
  if (!schema || typeof schema !== 'object') return undefined;
  let t = schema.type;
  if (Array.isArray(t)) t = t.find((x) => x !== 'null');
  if (t) return t;
  if (Array.isArray(schema.enum)) return typeof schema.enum[0] === 'number' ? 'number' : 'string';
  if (schema.properties) return 'object';
  return undefined;
}

/**
 * isSupported reports whether a form can represent the schema of an
 * object's properties (else the caller should offer raw JSON only).
 * @param {any} schema
 */
export function isSupported(schema) {
  return !schema || (typeOf(schema) ?? 'object') === 'object';
}

const inputTypeOfFormat = { email: 'email', uri: 'url', url: 'url', date: 'date', time: 'time', 'date-time': 'datetime-local' };

/**
 * buildField builds the editor of one value.
 * @param {object} o
 * @param {any} o.schema
 * @param {string} o.name Label text: the property's name.
 * @param {string} o.path Dotted path, for messages.
 * @param {string} o.idPrefix
 * @param {boolean} o.required Required by its parent object.
 * @param {boolean} o.nativeRequired Whether the browser may enforce it (all ancestors required).
 * @returns {{el: HTMLElement, get: () => {present: boolean, value?: any}, set: (v: any) => void}}
 */
function buildField(o) {
  const { schema = {}, name, path, idPrefix, required } = o;
  const type = typeOf(schema);
  const id = uid(`${idPrefix}-${path}`);
  const hintId = `${id}-hint`;
  const hintText = [schema.title && schema.title !== name ? schema.title : '', schema.description ?? ''].filter(Boolean).join(' \u2014 ');
  const hint = hintText ? h('p', { class: 'hint', id: hintId, text: hintText }) : null;
  const label = () => labelRow(id, name, required);
  const common = {
    id,
    name: path,
    'aria-describedby': hint ? hintId : null,
    required: o.nativeRequired && required,
    'aria-required': required ? 'true' : null,
  };

  if (Array.isArray(schema.enum)) {
    const values = schema.enum;
    const names = Array.isArray(schema.enumNames) ? schema.enumNames : [];
    const select = h(
      'select',
      common,
      required && schema.default !== undefined ? null : h('option', { value: '', text: required ? 'Choose\u2026' : '\u2014' }),
      values.map((v, i) => h('option', { value: String(i), text: names[i] ?? String(v) })),
    );
    const set = (v) => {
      const i = values.findIndex((x) => x === v);
      select.value = i >= 0 ? String(i) : '';
    };
    set(schema.default);
    return {
      el: h('div', { class: 'field' }, label(), select, hint),
      get: () => (select.value === '' ? { present: false } : { present: true, value: values[Number(select.value)] }),
      set,
    };
  }

  switch (type) {
    case 'string': {
      const multiline = schema.format === 'textarea' || (schema.maxLength ?? 0) > 200;
      const input = multiline
        ? h('textarea', { ...common, rows: 3 })
        : h('input', {
            ...common,
            type: inputTypeOfFormat[schema.format] ?? 'text',
            minlength: schema.minLength,
            maxlength: schema.maxLength,
            pattern: schema.pattern,
            autocomplete: 'off',
          });
      const set = (v) => {
        input.value = v === undefined || v === null ? '' : String(v);
      };
      set(schema.default);
      return {
        el: h('div', { class: 'field' }, label(), input, hint),
        get: () => (input.value === '' ? { present: false } : { present: true, value: input.value }),
        set,
        input,
      };
    }
    case 'number':
    case 'integer': {
      const input = h('input', {
        ...common,
        type: 'number',
        inputmode: type === 'integer' ? 'numeric' : 'decimal',
        step: type === 'integer' ? '1' : 'any',
        min: schema.minimum,
        max: schema.maximum,
      });
      const set = (v) => {
        input.value = v === undefined || v === null ? '' : String(v);
      };
      set(schema.default);
      return {
        el: h('div', { class: 'field' }, label(), input, hint),
        get: () => {
          if (input.value === '') return { present: false };
          const n = Number(input.value);
          if (!Number.isFinite(n)) throw new FormError(path, 'must be a number');
          if (type === 'integer' && !Number.isInteger(n)) throw new FormError(path, 'must be an integer');
          return { present: true, value: n };
        },
        set,
      };
    }
    case 'boolean': {
      const input = h('input', { ...common, type: 'checkbox', required: false });
      let touched = false;
      input.addEventListener('change', () => {
        touched = true;
      });
      const set = (v) => {
        input.checked = v === true;
      };
      set(schema.default);
      return {
        el: h('div', { class: 'field field-check' }, input, label(), hint),
        get: () => (required || touched || schema.default !== undefined ? { present: true, value: input.checked } : { present: false }),
        set: (v) => {
          touched = v !== undefined;
          set(v);
        },
      };
    }
    case 'object': {
      if (schema.properties || !schema.additionalProperties) {
        const obj = buildObject({ ...o, nativeRequired: o.nativeRequired && required });
        const fieldset = h('fieldset', { class: 'field-object', 'aria-describedby': hint ? hintId : null }, h('legend', {}, name, required ? h('span', { class: 'req', 'aria-hidden': 'true', text: ' *' }) : null), hint, obj.el);
        return {
          el: fieldset,
          get: () => {
            const v = obj.get();
            if (!v.present && !required) return { present: false };
            return { present: true, value: v.value ?? {} };
          },
          set: obj.set,
        };
      }
      break;
    }
    case 'array': {
      const items = schema.items && !Array.isArray(schema.items) ? schema.items : {};
      if (!typeOf(items) && !Array.isArray(items.enum)) break;
      const list = h('ol', { class: 'array-items' });
      /** @type {{row: HTMLElement, field: ReturnType<typeof buildField>}[]} */
      const rows = [];
      const relabel = () =>
        rows.forEach((r, i) => {
          r.remove.setAttribute('aria-label', `Remove ${name}[${i}]`);
          const l = r.row.querySelector('label, legend');
          if (l?.firstChild?.nodeType === Node.TEXT_NODE && l.firstChild.data.startsWith(`${name}[`)) l.firstChild.data = `${name}[${i}]`;
        });
      const addItem = (value) => {
        const field = buildField({ schema: items, name: `${name}[${rows.length}]`, path: `${path}[${rows.length}]`, idPrefix, required: true, nativeRequired: false });
        const remove = h('button', { type: 'button', class: 'icon-button', text: '\u2715', title: 'Remove' });
        const row = h('li', { class: 'array-item' }, field.el, remove);
        const entry = { row, field, remove };
        remove.addEventListener('click', () => {
          rows.splice(rows.indexOf(entry), 1);
          row.remove();
          relabel();
          add.focus();
        });
        rows.push(entry);
        list.append(row);
        if (value !== undefined) field.set(value);
        relabel();
        return field;
      };
      const add = h('button', { type: 'button', class: 'secondary small', 'aria-label': `Add ${name} item`, text: '+ Add item' });
      add.addEventListener('click', () => {
        addItem();
        rows.at(-1).row.querySelector('input, select, textarea')?.focus();
      });
      const set = (v) => {
        rows.splice(0).forEach((r) => r.row.remove());
        if (Array.isArray(v)) v.forEach((x) => addItem(x));
      };
      set(schema.default);
      return {
        el: h('fieldset', { class: 'field-array' }, h('legend', {}, name, required ? h('span', { class: 'req', 'aria-hidden': 'true', text: ' *' }) : null), hint, list, add),
        get: () => {
          if (rows.length === 0) return { present: false };
          return { present: true, value: rows.map((r) => r.field.get()).map((g) => (g.present ? g.value : typeOf(items) === 'string' ? '' : null)) };
        },
        set,
      };
    }
  }

  // Anything else: JSON for this one value.
  const ta = h('textarea', { ...common, rows: 2, class: 'json', spellcheck: 'false', placeholder: 'JSON value' });
  const set = (v) => {
    ta.value = v === undefined ? '' : JSON.stringify(v);
  };
  set(schema.default);
  return {
    el: h('div', { class: 'field' }, label(), ta, hint ?? h('p', { class: 'hint', id: hintId, text: 'Any JSON value' })),
    get: () => {
      if (ta.value.trim() === '') return { present: false };
      try {
        return { present: true, value: JSON.parse(ta.value) };
      } catch {
        throw new FormError(path, 'is not valid JSON');
      }
    },
    set,
  };
}

function buildObject(o) {
  const { schema = {}, path, idPrefix } = o;
  const props = schema.properties ?? {};
  const requiredSet = new Set(Array.isArray(schema.required) ? schema.required : []);
  const fields = Object.entries(props).map(([key, sub]) => ({
    key,
    field: buildField({
      schema: sub,
      name: key,
      path: path ? `${path}.${key}` : key,
      idPrefix,
      required: requiredSet.has(key),
      nativeRequired: o.nativeRequired ?? true,
    }),
  }));
  const el = h('div', { class: 'fields' }, fields.map((f) => f.field.el));
  return {
    el,
    fields,
    get: () => {
      const value = {};
      let present = false;
      for (const { key, field } of fields) {
        const g = field.get();
        if (g.present) {
          value[key] = g.value;
          present = true;
        }
      }
      if (present || o.top) {
        for (const key of requiredSet) {
          if (!(key in value) && key in props) throw new FormError(path ? `${path}.${key}` : key, 'is required');
        }
      }
      return { present, value };
    },
    set: (v) => {
      for (const { key, field } of fields) field.set(v && typeof v === 'object' ? v[key] : undefined);
    },
  };
}

/**
 * buildSchemaForm builds the fields of an object schema.
 * @param {any} schema An object schema (inputSchema, requestedSchema).
 * @param {{idPrefix?: string}} [opts]
 * @returns {{el: HTMLElement, get: () => object, set: (v: object) => void, empty: boolean}}
 *   get throws a FormError when a value does not fit.
 */
export function buildSchemaForm(schema, opts = {}) {
  const obj = buildObject({ schema: schema ?? {}, path: '', idPrefix: opts.idPrefix ?? 'f', nativeRequired: true, top: true });
  return {
    el: obj.el,
    empty: obj.fields.length === 0,
    get: () => obj.get().value,
    set: obj.set,
  };
}
