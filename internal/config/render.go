package config

import (
	"bytes"
	"cmp"
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Two ways to write a Config back as YAML, besides Marshal:
//
//   - Minimal: what a person reads and edits. Only the keys whose value
//     differs from what applyDefaults would give, each explained by a
//     comment (from keyDocs) where it first appears. It never holds a null
//     or an empty string, and Parse gives back the same config.
//   - Effective: every key with its resolved value, for
//     `vigil config show --effective`.

// minimalNote opens every Minimal file.
const minimalNote = "# Only the settings that differ from the defaults are listed;\n" +
	"# `vigil config show --effective FILE` prints every one.\n\n"

// Minimal writes c with only the keys that differ from their defaults,
// each key explained once. Passwords are written as they are: the result
// is a config file.
func Minimal(c *Config) ([]byte, error) {
	body, err := render(c, renderOptions{comments: true})
	if err != nil {
		return nil, err
	}
	return append([]byte(minimalNote), body...), nil
}

// Secret is what Effective writes instead of a password or token when
// asked to mask them.
const Secret = "*****"

// Effective writes c with every key and its resolved value: the defaults
// applied, digests.enabled and users[].multiplexing (on unless set off)
// spelled out. Absent optional sections (tls, log.file, log.kafka, rule
// actions…) stay absent. With mask, passwords and the admin token are
// written as Secret, which makes the output informative but not loadable.
func Effective(c *Config, mask bool) ([]byte, error) {
	e := c.clone()
	e.applyDefaults()
	e.spellOutSwitches()
	if mask {
		e.maskSecrets()
	}
	return render(e, renderOptions{all: true})
}

// spellOutSwitches sets the switches that are on unless set off
// (digests.enabled, users[].multiplexing, clusters[].failover.auto_rejoin
// of replication clusters) to their value.
func (c *Config) spellOutSwitches() {
	on := true
	if c.Digests.Enabled == nil {
		c.Digests.Enabled = &on
	}
	for i := range c.Users {
		if c.Users[i].Multiplexing == nil {
			c.Users[i].Multiplexing = &on
		}
	}
	for i := range c.Clusters {
		if f := &c.Clusters[i].Failover; f.AutoRejoin == nil && c.Clusters[i].Type == "replication" {
			f.AutoRejoin = &on
		}
	}
}

// maskSecrets replaces every non-empty password and token by Secret.
func (c *Config) maskSecrets() {
	hide := func(s *string) {
		if *s != "" {
			*s = Secret
		}
	}
	hide(&c.Admin.Token)
	hide(&c.Admin.Password)
	for i := range c.Users {
		hide(&c.Users[i].Password)
		hide(&c.Users[i].BackendPassword)
	}
	for i := range c.Clusters {
		hide(&c.Clusters[i].Monitor.Password)
		hide(&c.Clusters[i].Failover.ReplPassword)
	}
	hide(&c.Coordination.Etcd.Password)
	hide(&c.Shards.MovePassword)
}

type renderOptions struct {
	// all writes every key, defaults and zero values included; otherwise
	// only the keys that differ from their defaults.
	all bool
	// comments explains each key (keyDocs) at its first occurrence.
	comments bool
	// keep names key paths ("clusters[].type") written even when they
	// hold the default: what a starter file shows on purpose.
	keep map[string]bool
}

// renderer builds the YAML node tree of one config.
type renderer struct {
	opts renderOptions
	// full is the config being written, defaults applied: what a key's
	// value is compared with.
	full *Config
	seen map[string]bool // key paths already explained
	err  error           // the first value that could not be encoded
}

func render(c *Config, opts renderOptions) ([]byte, error) {
	full := c.clone()
	full.applyDefaults()
	r := &renderer{opts: opts, full: full, seen: map[string]bool{}}
	root := r.mapping(reflect.ValueOf(full).Elem(), "", nil, false)
	if r.err != nil {
		return nil, r.err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// mapping is the mapping node of struct v at key path path; steps lead
// from the Config to v (field and element indices). An item of a list
// always shows its name.
func (r *renderer) mapping(v reflect.Value, path string, steps []int, item bool) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		p := key
		if path != "" {
			p = path + "." + key
		}
		val := r.value(v.Field(i), p, append(steps[:len(steps):len(steps)], i), item && key == "name")
		if val == nil {
			continue
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key, HeadComment: r.explain(p)}, val)
	}
	return m
}

// value is the node of the value v of key path, or nil when the key is
// left out. show writes a non-empty leaf even when it is the default.
func (r *renderer) value(v reflect.Value, path string, steps []int, show bool) *yaml.Node {
	t := v.Type()
	switch {
	case isLeaf(t):
		if t.Kind() == reflect.Pointer && v.IsNil() {
			return nil
		}
		if !r.opts.all && !r.opts.keep[path] && (isEmpty(v) || !show && r.isDefault(steps, v)) {
			return nil
		}
		n := &yaml.Node{}
		if err := n.Encode(v.Interface()); err != nil {
			r.err = cmp.Or(r.err, fmt.Errorf("%s: %w", path, err))
			return nil
		}
		flowLists(n)
		return n
	case t.Kind() == reflect.Pointer: // an optional section: there or not
		if v.IsNil() {
			return nil
		}
		return r.mapping(v.Elem(), path, steps, false)
	case t.Kind() == reflect.Struct:
		m := r.mapping(v, path, steps, false)
		if len(m.Content) == 0 && !r.opts.all {
			return nil
		}
		return m
	default: // a list of sections: users, clusters, servers, rules
		if v.Len() == 0 && !r.opts.all {
			return nil
		}
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		if v.Len() == 0 {
			seq.Style = yaml.FlowStyle
		}
		for i := range v.Len() {
			m := r.mapping(v.Index(i), path+"[]", append(steps[:len(steps):len(steps)], i), true)
			if len(m.Content) > 0 {
				// "- # comment" reads badly: the first key's comment goes
				// above the dash.
				m.HeadComment, m.Content[0].HeadComment = m.Content[0].HeadComment, ""
			}
			seq.Content = append(seq.Content, m)
		}
		return seq
	}
}

// isDefault reports whether leaving the key at steps out of the file
// gives it the value v again.
func (r *renderer) isDefault(steps []int, v reflect.Value) bool {
	c := r.full.clone()
	f := fieldAt(c, steps)
	f.Set(reflect.Zero(f.Type()))
	c.applyDefaults()
	return reflect.DeepEqual(fieldAt(c, steps).Interface(), v.Interface())
}

// explain is the comment of key path at its first occurrence, if comments
// are on.
func (r *renderer) explain(path string) string {
	if !r.opts.comments || r.seen[path] {
		return ""
	}
	r.seen[path] = true
	return keyDocs[path]
}

// fieldAt follows steps (field indices in structs, element indices in
// slices) from c to a value.
func fieldAt(c *Config, steps []int) reflect.Value {
	v := reflect.ValueOf(c).Elem()
	for _, s := range steps {
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		if v.Kind() == reflect.Slice {
			v = v.Index(s)
		} else {
			v = v.Field(s)
		}
	}
	return v
}

var marshalerType = reflect.TypeFor[yaml.Marshaler]()

// isLeaf: a value written as a whole (scalar, Duration, *bool, a list of
// strings, server_groups), not as a section of keys.
func isLeaf(t reflect.Type) bool {
	if t.Implements(marshalerType) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct:
		return false
	case reflect.Pointer, reflect.Slice:
		return t.Elem().Kind() != reflect.Struct
	}
	return true
}

// isEmpty: zero, or a list or map with nothing in it.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	}
	return v.IsZero()
}

// flowLists writes lists of scalars on one line: [node2, node3].
func flowLists(n *yaml.Node) {
	for _, c := range n.Content {
		flowLists(c)
	}
	if n.Kind != yaml.SequenceNode {
		return
	}
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode {
			return
		}
	}
	n.Style = yaml.FlowStyle
}

// clone is a deep copy of c: applyDefaults on it leaves c alone.
func (c *Config) clone() *Config {
	return deepCopy(reflect.ValueOf(c)).Interface().(*Config)
}

func deepCopy(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(deepCopy(v.Elem()))
		return p
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v) // unexported fields too
		for i := range v.NumField() {
			if out.Field(i).CanSet() {
				out.Field(i).Set(deepCopy(v.Field(i)))
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(deepCopy(v.Index(i)))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(it.Key(), deepCopy(it.Value()))
		}
		return out
	}
	return v
}
