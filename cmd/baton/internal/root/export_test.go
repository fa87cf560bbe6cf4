package root

// NewCmdRootStubbed is newCmdRoot, for the tests of package root_test
// (which import package full, and full imports root).
var NewCmdRootStubbed = newCmdRoot

// Execute is execute, for them.
var Execute = execute

// FullVerbShorts are the summaries the client program lists the full
// program's verbs by.
func FullVerbShorts() map[string]string {
	m := map[string]string{}
	for _, v := range fullVerbs {
		m[v.name] = v.short
	}
	return m
}
