package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// OutputFile is the file recgen writes in each package.
const OutputFile = "codec_gen.go"

// directive marks a record type; viewDirective a view of one: a struct of
// some of a record's fields, read from the record's layout.
const (
	directive     = "//jsonrec:codec"
	viewDirective = "//jsonrec:view"
)

// Import paths of the types recgen knows by name.
const (
	jsonrecPath = "github.com/batonhq/baton/internal/jsonrec"
	jsonPath    = "encoding/json"
	timePath    = "time"
)

// kind is how a field is written and read.
type kind int

const (
	kString     kind = iota // string, or a type whose underlying type is string
	kInt                    // int
	kInt64                  // int64
	kUint64                 // uint64
	kBool                   // bool
	kTime                   // time.Time
	kBytes                  // []byte (base64)
	kStrings                // []string
	kStringMap              // map[string]string
	kDuration               // jsonrec.Duration ("10s")
	kRawJSON                // json.RawMessage (encode only)
	kIntPtr                 // *int
	kStructPtr              // *S, S a struct of the package
	kStructPtrs             // []*S, S a struct of the package
	kStructs                // []S, S a struct of the package
)

// field is one member of a record.
type field struct {
	goName  string
	name    string // JSON name
	typ     string // the Go type, as written
	kind    kind
	named   bool     // a defined type over kString, kInt, kInt64, kUint64: converted
	enum    []string // kString of a defined type with constants: their values
	elem    string   // kStructPtr, kStructPtrs: the struct's type name
	omitEmp bool
	omitZer bool
}

// record is a struct type recgen writes a codec for.
type record struct {
	name       string
	top        bool // carries the directive
	part       bool // a record points to it
	listed     bool // a record holds a list of pointers to it
	listedVal  bool // a record holds a list of it, by value
	encodeOnly bool
	fields     []field
}

// view is a struct that keeps some of a record's fields, each of the same
// name and type as the record's.
type view struct {
	name string
	of   *record
	keep map[string]bool // Go names of the fields it keeps
}

// pkg is what recgen read of a package.
type pkg struct {
	name    string
	records []*record // in the order of their declarations
	views   []*view
}

// typeDecl is a type declared in the package, and the imports of its file.
type typeDecl struct {
	spec    *ast.TypeSpec
	imports map[string]string // local name -> path
	mark    string            // the directive's line, if any
	viewOf  string            // the record a view directive names
	pos     token.Position
}

// load parses the package in dir (its non-test files, but the output) and
// resolves its record types.
func load(dir string) (*pkg, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &pkg{}
	decls := map[string]*typeDecl{}
	consts := map[string][]string{}
	var order []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || n == OutputFile {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if p.name == "" {
			p.name = f.Name.Name
		}
		imports := map[string]string{}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			local := path[strings.LastIndex(path, "/")+1:]
			if im.Name != nil {
				local = im.Name.Name
			}
			imports[local] = path
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if ok && gd.Tok == token.CONST {
				collectConsts(gd, consts)
			}
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				td := &typeDecl{spec: ts, imports: imports, pos: fset.Position(ts.Pos())}
				for _, doc := range []*ast.CommentGroup{ts.Doc, gd.Doc} {
					if m := findMark(doc, directive); m != "" {
						td.mark = m
					}
					if m := findMark(doc, viewDirective); m != "" {
						td.viewOf = strings.TrimSpace(strings.TrimPrefix(m, viewDirective))
					}
				}
				decls[ts.Name.Name] = td
				order = append(order, ts.Name.Name)
			}
		}
	}
	r := &resolver{decls: decls, records: map[string]*record{}, consts: consts}
	for _, name := range order {
		td := decls[name]
		if td.mark == "" {
			continue
		}
		opt := strings.TrimSpace(strings.TrimPrefix(td.mark, directive))
		if opt != "" && opt != "encode" {
			return nil, fmt.Errorf("%s: %s %s: want no option or \"encode\"", td.pos, directive, opt)
		}
		rec, err := r.record(name)
		if err != nil {
			return nil, err
		}
		rec.top, rec.encodeOnly = true, opt == "encode"
	}
	for _, name := range order {
		if rec := r.records[name]; rec != nil {
			p.records = append(p.records, rec)
		}
	}
	// A part takes the decoder if any record that holds it does.
	for _, rec := range p.records {
		if rec.top && !rec.encodeOnly {
			r.needDecode(rec)
		}
	}
	for _, rec := range p.records {
		for _, f := range rec.fields {
			if !rec.encodeOnly && f.kind == kRawJSON {
				return nil, fmt.Errorf("%s.%s: a json.RawMessage is only written, not read, the fast way: mark the record \"%s encode\"", rec.name, f.goName, directive)
			}
		}
	}
	for _, name := range order {
		if td := decls[name]; td.viewOf != "" {
			v, err := r.view(name, td)
			if err != nil {
				return nil, err
			}
			p.views = append(p.views, v)
		}
	}
	return p, nil
}

func findMark(doc *ast.CommentGroup, mark string) string {
	if doc == nil {
		return ""
	}
	for _, c := range doc.List {
		if c.Text == mark || strings.HasPrefix(c.Text, mark+" ") {
			return c.Text
		}
	}
	return ""
}

// view resolves the view name: a struct whose fields are some of its
// record's, of the same names and types.
func (r *resolver) view(name string, td *typeDecl) (*view, error) {
	of := r.records[td.viewOf]
	if of == nil || !of.top || of.encodeOnly {
		return nil, fmt.Errorf("%s: %s %s: %q is not a record of the package with a decoder", td.pos, viewDirective, td.viewOf, td.viewOf)
	}
	st, ok := td.spec.Type.(*ast.StructType)
	if !ok {
		return nil, fmt.Errorf("%s: %s is not a struct type", td.pos, name)
	}
	base := r.decls[of.name].spec.Type.(*ast.StructType)
	types := map[string]string{}
	for _, f := range base.Fields.List {
		for _, id := range f.Names {
			types[id.Name] = exprString(f.Type)
		}
	}
	v := &view{name: name, of: of, keep: map[string]bool{}}
	for _, f := range st.Fields.List {
		for _, id := range f.Names {
			want, ok := types[id.Name]
			if !ok || !slices.ContainsFunc(of.fields, func(rf field) bool { return rf.goName == id.Name }) {
				return nil, fmt.Errorf("%s: %s.%s: %s has no such field to read", td.pos, name, id.Name, of.name)
			}
			if got := exprString(f.Type); got != want {
				return nil, fmt.Errorf("%s: %s.%s is a %s; %s's is a %s", td.pos, name, id.Name, got, of.name, want)
			}
			v.keep[id.Name] = true
		}
	}
	return v, nil
}

type resolver struct {
	decls   map[string]*typeDecl
	records map[string]*record
	decoded map[string]bool
	consts  map[string][]string // a defined type's string constants, in order
}

func (r *resolver) needDecode(rec *record) {
	if r.decoded == nil {
		r.decoded = map[string]bool{}
	}
	if r.decoded[rec.name] {
		return
	}
	r.decoded[rec.name] = true
	rec.encodeOnly = false
	for _, f := range rec.fields {
		if f.kind == kStructPtr || f.kind == kStructPtrs || f.kind == kStructs {
			r.needDecode(r.records[f.elem])
		}
	}
}

// record resolves the struct type name, and the structs it points to.
func (r *resolver) record(name string) (*record, error) {
	if rec := r.records[name]; rec != nil {
		return rec, nil
	}
	td := r.decls[name]
	if td == nil {
		return nil, fmt.Errorf("type %s is not declared in the package", name)
	}
	st, ok := td.spec.Type.(*ast.StructType)
	if !ok || td.spec.Assign != 0 {
		return nil, fmt.Errorf("%s: %s is not a struct type", td.pos, name)
	}
	rec := &record{name: name, encodeOnly: true}
	r.records[name] = rec
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 {
			return nil, fmt.Errorf("%s: %s: embedded fields are not supported", td.pos, name)
		}
		tag := ""
		if f.Tag != nil {
			s, _ := strconv.Unquote(f.Tag.Value)
			tag = reflect.StructTag(s).Get("json")
		}
		for _, id := range f.Names {
			if !id.IsExported() || tag == "-" {
				continue
			}
			fd, err := r.field(td, id.Name, tag, f.Type)
			if err != nil {
				return nil, fmt.Errorf("%s: %s.%s: %w", td.pos, name, id.Name, err)
			}
			rec.fields = append(rec.fields, fd)
		}
	}
	if len(rec.fields) == 0 {
		return nil, fmt.Errorf("%s: %s has no fields to write", td.pos, name)
	}
	if rec.fields[0].omitEmp || rec.fields[0].omitZer {
		return nil, fmt.Errorf("%s: %s: the first field may not be omitted (the layout starts with it)", td.pos, name)
	}
	if len(rec.fields) > 64 {
		return nil, fmt.Errorf("%s: %s: more than 64 fields", td.pos, name)
	}
	names := map[string]bool{}
	for _, f := range rec.fields {
		if names[f.name] {
			return nil, fmt.Errorf("%s: %s: two fields named %q", td.pos, name, f.name)
		}
		names[f.name] = true
	}
	return rec, nil
}

func (r *resolver) field(td *typeDecl, goName, tag string, typ ast.Expr) (field, error) {
	f := field{goName: goName, name: goName, typ: exprString(typ)}
	if tag != "" {
		parts := strings.Split(tag, ",")
		if parts[0] != "" {
			f.name = parts[0]
		}
		for _, o := range parts[1:] {
			switch o {
			case "omitempty":
				f.omitEmp = true
			case "omitzero":
				f.omitZer = true
			default:
				return f, fmt.Errorf("tag option %q is not supported", o)
			}
		}
	}
	if !plainName(f.name) {
		return f, fmt.Errorf("JSON name %q needs escaping", f.name)
	}
	k, named, elem, err := r.kindOf(td, typ, false)
	if err != nil {
		return f, err
	}
	f.kind, f.named, f.elem = k, named, elem
	if id, ok := typ.(*ast.Ident); ok && k == kString && named {
		f.enum = r.consts[id.Name]
	}
	return f, nil
}

// collectConsts records the string constants of gd declared with a type
// of the package (High Priority = "high"), by type, in order.
func collectConsts(gd *ast.GenDecl, consts map[string][]string) {
	for _, sp := range gd.Specs {
		vs, ok := sp.(*ast.ValueSpec)
		if !ok || vs.Type == nil || len(vs.Names) != len(vs.Values) {
			continue
		}
		typ, ok := vs.Type.(*ast.Ident)
		if !ok {
			continue
		}
		for _, v := range vs.Values {
			if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if val, err := strconv.Unquote(lit.Value); err == nil {
					consts[typ.Name] = append(consts[typ.Name], val)
				}
			}
		}
	}
}

// plainName reports whether a member name is written as it is.
func plainName(s string) bool {
	for _, c := range s {
		if c > unicode.MaxASCII || c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return s != ""
}

// kindOf resolves a field's type; named reports a defined type that the
// generated code converts.
func (r *resolver) kindOf(td *typeDecl, typ ast.Expr, named bool) (kind, bool, string, error) {
	switch t := typ.(type) {
	case *ast.Ident:
		switch t.Name {
		case "string":
			return kString, named, "", nil
		case "int":
			return kInt, named, "", nil
		case "int64":
			return kInt64, named, "", nil
		case "uint64":
			return kUint64, named, "", nil
		case "bool":
			if named {
				return 0, false, "", fmt.Errorf("a defined bool type is not supported")
			}
			return kBool, false, "", nil
		}
		d := r.decls[t.Name]
		if d == nil {
			return 0, false, "", fmt.Errorf("type %s is not supported", t.Name)
		}
		if _, isStruct := d.spec.Type.(*ast.StructType); isStruct {
			return 0, false, "", fmt.Errorf("a struct by value (%s) is not supported: use a pointer", t.Name)
		}
		// A defined type converts; an alias is the type it names.
		return r.kindOf(d, d.spec.Type, named || d.spec.Assign == 0)
	case *ast.SelectorExpr:
		x, ok := t.X.(*ast.Ident)
		if !ok {
			break
		}
		switch path := td.imports[x.Name]; {
		case path == timePath && t.Sel.Name == "Time":
			return kTime, false, "", nil
		case path == jsonPath && t.Sel.Name == "RawMessage":
			return kRawJSON, false, "", nil
		case path == jsonrecPath && t.Sel.Name == "Duration":
			return kDuration, false, "", nil
		}
	case *ast.ArrayType:
		if t.Len != nil || named {
			break
		}
		if id, ok := t.Elt.(*ast.Ident); ok {
			switch id.Name {
			case "byte":
				return kBytes, false, "", nil
			case "string":
				return kStrings, false, "", nil
			}
		}
		if id, ok := t.Elt.(*ast.Ident); ok {
			if d := r.decls[id.Name]; d != nil {
				if _, isStruct := d.spec.Type.(*ast.StructType); isStruct {
					rec, err := r.record(id.Name)
					if err != nil {
						return 0, false, "", err
					}
					rec.listedVal = true
					return kStructs, false, id.Name, nil
				}
			}
		}
		if st, ok := t.Elt.(*ast.StarExpr); ok {
			if id, ok := st.X.(*ast.Ident); ok {
				rec, err := r.record(id.Name)
				if err != nil {
					return 0, false, "", err
				}
				rec.part, rec.listed = true, true
				return kStructPtrs, false, id.Name, nil
			}
		}
	case *ast.MapType:
		k, ok1 := t.Key.(*ast.Ident)
		v, ok2 := t.Value.(*ast.Ident)
		if ok1 && ok2 && k.Name == "string" && v.Name == "string" && !named {
			return kStringMap, false, "", nil
		}
	case *ast.StarExpr:
		id, ok := t.X.(*ast.Ident)
		if !ok || named {
			break
		}
		if id.Name == "int" {
			return kIntPtr, false, "", nil
		}
		rec, err := r.record(id.Name)
		if err != nil {
			return 0, false, "", err
		}
		rec.part = true
		return kStructPtr, false, id.Name, nil
	}
	return 0, false, "", fmt.Errorf("type %s is not supported", exprString(typ))
}

func exprString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return exprString(t.X) + "." + t.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(t.X)
	case *ast.ArrayType:
		return "[]" + exprString(t.Elt)
	case *ast.MapType:
		return "map[" + exprString(t.Key) + "]" + exprString(t.Value)
	}
	return fmt.Sprintf("%T", e)
}

// sortedNames is a record's JSON names, sorted.
func sortedNames(rec *record) []string {
	var names []string
	for _, f := range rec.fields {
		names = append(names, f.name)
	}
	sort.Strings(names)
	return names
}
