package templating

import (
	"context"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // substrings, one per expected error, in order
	}{
		{name: "minimal", doc: minimal},
		{name: "topology and capacity", doc: withSection(`
topologyKeys: [kubernetes.io/hostname, topology.kubernetes.io/zone]
storageCapacity:
  refreshPeriod: 30s
  podTemplate:
    spec:
      nodeName: "{{ nodeName }}"
      containers: [{name: df, image: img, command: [sh, -c, "df {{ params.path | tobash }} {{ topology['kubernetes.io/hostname'] | tobash }}"]}]
`)},
		{name: "capacity template may be zero", doc: withSection(`
topologyKeys: [kubernetes.io/hostname]
storageCapacity:
  capacity: "{{ 0 if topology['kubernetes.io/hostname'] == 'full' else '10Gi' }}"
`)},
		{name: "capacity without topology, both ways, short period, bad key", doc: withSection(`
topologyKeys: ["not a key", "not a key"]
storageCapacity:
  refreshPeriod: 10ms
  capacity: 1Gi
  podTemplate: {spec: {containers: [{name: c, image: img}]}}
`), want: []string{"spec.topologyKeys[0]: Invalid value", "spec.topologyKeys[1]: Invalid value", "spec.topologyKeys[1]: Duplicate value",
			"spec.storageCapacity: Required value: give exactly one of capacity", "spec.storageCapacity.refreshPeriod: Invalid value"}},
		{name: "capacity needs topology keys", doc: withSection(`
storageCapacity: {capacity: 1Gi}
`), want: []string{"spec.topologyKeys: Required value: storage capacity is tracked per topology segment"}},
		{name: "every section literal", doc: withSection(`
volumeValidation:
  volumeModes: [Filesystem, Block]
  accessModes: [ReadWriteOnce, ReadOnlyMany, ReadWriteMany]
  minCapacity: 1Mi
  maxCapacity: 1099511627776
  podTemplate:
    spec:
      restartPolicy: OnFailure
      containers: [{name: v, image: img}]
volumeCreation:
  handle: h
  capacity: "1.5Gi"
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchFields: [{key: metadata.name, operator: In, values: [node-1]}]
  podTemplate:
    metadata: {namespace: storage, labels: {a: b}, annotations: {x: z}}
    spec:
      containers:
        - name: c
          image: img
          ports: [{containerPort: 80}]
          resources: {limits: {cpu: 100m}}
          volumeMounts: [{name: d, mountPath: /pav-data}]
      volumes: [{name: d, emptyDir: {}}]
volumeDeletion:
  podTemplate: {spec: {containers: [{name: c, image: img}]}}
volumeUnstaging:
  podTemplate: {spec: {containers: [{name: c, image: img}]}}
`)},
		{name: "templated parts are not checked", doc: withSection(`
volumeValidation:
  volumeModes: "{% set yaml = true %}[{{ params.mode }}]"
  accessModes: ["{{ params.am }}", ReadWriteOnce]
  minCapacity: "{{ params.min }}"
volumeCreation:
  capacity: "{{ requestedMinCapacity }}"
  handle: "{{ defaultHandle }}"
  nodeAffinity: "{% set yaml = true %}{{ params.affinity }}"
  podTemplate:
    metadata:
      namespace: "{{ params.ns }}"
      labels: {a: "{{ params.l }}"}
    spec:
      restartPolicy: "{{ params.rp }}"
      containers:
        - name: "{{ params.name }}"
          image: "{{ params.image }}"
          ports: [{containerPort: "{% set yaml = true %}{{ params.port }}"}]
      volumes: "{% set yaml = true %}{{ params.volumes }}"
`)},
		{name: "snapshot sections", doc: withSection(`
snapshotCreation:
  podTemplate:
    spec:
      nodeName: "{{ pv.metadata.name }}"
      containers: [{name: c, image: img, command: [sh, -c, "echo {{ snapshotContent.metadata.uid }} > /pav/snapshot-handle"]}]
snapshotDeletion:
  podTemplate: {spec: {containers: [{name: c, image: img, args: ["{{ snapshotHandle }}"]}]}}
`)},
		{name: "bad snapshot sections", doc: withSection(`
snapshotCreation:
  podTemplate: {spec: {containers: [{name: c}]}}
  handle: h
snapshotDeletion:
  podTemplate: "{{ unclosed"
`), want: []string{"spec.snapshotCreation.handle", "spec.snapshotDeletion.podTemplate", "spec.snapshotCreation.podTemplate.spec.containers[0].image"}},
		{name: "a whole pod template may be a template", doc: withSection(`
volumeUnstaging:
  podTemplate: "{% set yaml = true %}{{ params.pod }}"
`)},

		{name: "no modes", doc: strings.Replace(minimalNoCreation, "provisioningModes: [Dynamic, Static]", "provisioningModes: []", 1),
			want: []string{"spec.provisioningModes: Required value"}},
		{name: "bad and duplicate modes", doc: strings.Replace(minimal, "[Dynamic, Static]", "[Dynamic, dynamic, Dynamic]", 1),
			want: []string{`spec.provisioningModes[1]: Unsupported value: "dynamic"`, `spec.provisioningModes[2]: Duplicate value: "Dynamic"`}},
		{name: "fsGroupPolicy", doc: strings.Replace(minimal, "  volumeStaging:\n", "  volumeStaging:\n    fsGroupPolicy: File\n", 1)},
		{name: "bad fsGroupPolicy", doc: strings.Replace(minimal, "  volumeStaging:\n", "  volumeStaging:\n    fsGroupPolicy: file\n", 1),
			want: []string{`spec.volumeStaging.fsGroupPolicy: Unsupported value: "file": supported values: "None", "File", "ReadWriteOnceWithFSType"`}},
		{name: "no staging", doc: `
metadata: {name: test}
spec:
  provisioningModes: [Static]
`, want: []string{"spec.volumeStaging: Required value"}},
		{name: "no staging pod", doc: `
metadata: {name: test}
spec:
  provisioningModes: [Static]
  volumeStaging: {}
`, want: []string{"spec.volumeStaging.podTemplate: Required value"}},
		{name: "dynamic-only sections", doc: strings.Replace(withSection(`
volumeCreation: {capacity: 1Gi}
volumeDeletion: {}
volumeModification: {}
`), "[Dynamic, Static]", "[Static]", 1),
			want: []string{"spec.volumeCreation: Forbidden: may only be specified if provisioningModes contains Dynamic", "spec.volumeDeletion: Forbidden", "spec.volumeModification: Forbidden"}},
		{name: "modification section", doc: withSection(`
volumeModification:
  podTemplate:
    spec:
      containers: [{name: c, image: img, args: ["{{ handle }}", "{{ currentMutableParams.iops | default('') }}", "{{ mutableParams.iops }}"]}]
`)},
		{name: "bad modification section", doc: withSection(`
volumeModification:
  podTemplate: {spec: {containers: [{name: c}]}}
  capacity: 1Gi
`), want: []string{"spec.volumeModification.capacity", "spec.volumeModification.podTemplate.spec.containers[0].image"}},
		{name: "bad name", doc: strings.Replace(minimal, "name: test", "name: Test_1", 1),
			want: []string{`metadata.name: Invalid value: "Test_1"`}},
		{name: "long name", doc: strings.Replace(minimal, "name: test", "name: "+strings.Repeat("a", 64), 1),
			want: []string{"metadata.name: Invalid value"}},
		{name: "no name", doc: strings.Replace(minimal, "name: test", "name: ''", 1),
			want: []string{"metadata.name: Required value"}},
		{name: "namespaced", doc: strings.Replace(minimal, "name: test", "{name: test, namespace: ns}", 1),
			want: []string{"metadata.namespace: Forbidden"}},
		{name: "wrong kind and apiVersion", doc: strings.Replace(strings.Replace(minimal, "kind: PavProvisioner", "kind: Pod", 1), "/v1alpha1", "/v1", 1),
			want: []string{`apiVersion: Unsupported value: "pav.albertofaria.github.io/v1"`, `kind: Unsupported value: "Pod"`}},

		{name: "template syntax error", doc: withSection(`
volumeUnstaging:
  podTemplate:
    spec:
      containers:
        - name: c
          image: img
          command: [sh, -c, "echo {{ handle"]
`), want: []string{"spec.volumeUnstaging.podTemplate.spec.containers[0].command[2]: Invalid value: template line 1, column"}},
		{name: "min above max", doc: withSection(`
volumeValidation:
  minCapacity: 2Gi
  maxCapacity: 1Gi
`), want: []string{"spec.volumeValidation.maxCapacity: Invalid value: \"1Gi\": must not be less than minCapacity (2Gi)"}},
		{name: "no modes at all", doc: withSection(`
volumeValidation:
  volumeModes: []
  accessModes: []
`), want: []string{"spec.volumeValidation.accessModes: Required value: must list at least one access mode",
			"spec.volumeValidation.volumeModes: Required value: must list at least one volume mode"}},
		{name: "zero capacity", doc: withSection(`
volumeCreation:
  capacity: 0
`), want: []string{`spec.volumeCreation.capacity: Invalid value: "0": a volume's capacity must be positive`}},
		{name: "dynamic without a capacity or creation pod", doc: strings.Replace(minimalNoCreation, "[Dynamic, Static]", "[Dynamic]", 1),
			want: []string{"spec.volumeCreation: Required value: a provisioner with provisioningModes Dynamic needs volumeCreation.capacity or a volumeCreation.podTemplate"}},
		{name: "dynamic with only a handle", doc: withSection(`
volumeCreation:
  handle: h
`), want: []string{"spec.volumeCreation: Required value"}},
		{name: "static needs no capacity", doc: strings.Replace(minimalNoCreation, "[Dynamic, Static]", "[Static]", 1)},
		{name: "templated capacity and modes pass", doc: withSection(`
volumeValidation:
  minCapacity: "{{ params.min }}"
  maxCapacity: 1Gi
  volumeModes: ["{{ params.mode }}"]
volumeCreation:
  capacity: "{{ requestedMinCapacity }}"
`)},
		{name: "unknown filter", doc: withSection(`
volumeCreation:
  handle: "{{ defaultHandle | nosuchfilter }}"
  capacity: 1Gi
`), want: []string{"spec.volumeCreation.handle: Invalid value: template line 1"}},

		{name: "bad literal modes", doc: withSection(`
volumeValidation:
  volumeModes: [Filesystem, Blocks, 3]
  accessModes: [ReadWriteOncePod, ReadWriteOnceNode]
`), want: []string{
			`spec.volumeValidation.accessModes[1]: Unsupported value: "ReadWriteOnceNode": supported values: "ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"`,
			`spec.volumeValidation.volumeModes[2]: Invalid value: 3: must be a string`,
			`spec.volumeValidation.volumeModes[1]: Unsupported value: "Blocks"`}},
		{name: "modes not a list", doc: withSection(`
volumeValidation:
  volumeModes: Filesystem
`), want: []string{`spec.volumeValidation.volumeModes: Invalid value: "Filesystem": must be a list of strings`}},
		{name: "bad capacities", doc: withSection(`
volumeValidation:
  minCapacity: abc
  maxCapacity: -1
volumeCreation:
  capacity: [1]
`), want: []string{
			`spec.volumeValidation.maxCapacity: Invalid value: "-1": must not be negative`,
			`spec.volumeValidation.minCapacity: Invalid value: "abc": must be a capacity`,
			`spec.volumeCreation.capacity: Invalid value: "<list>": must be a capacity`}},
		{name: "bad handles", doc: withSection(`
volumeCreation:
  handle: 12
  capacity: 1Gi
`), want: []string{"spec.volumeCreation.handle: Invalid value: 12: must be a string"}},
		{name: "empty handle", doc: withSection(`
volumeCreation:
  handle: ""
  capacity: 1Gi
`), want: []string{"spec.volumeCreation.handle: Invalid value: \"\": the handle is empty"}},
		{name: "handles that are not a file name", doc: withSection(`
volumeCreation:
  handle: ".."
  capacity: 1Gi
`), want: []string{`spec.volumeCreation.handle: Invalid value: "..": the handle ".." is not allowed: templates use handles as paths`}},
		{name: "handle with a slash", doc: withSection(`
volumeCreation:
  handle: "../../etc"
  capacity: 1Gi
`), want: []string{`spec.volumeCreation.handle: Invalid value: "../../etc": the handle "../../etc" is not allowed`}},
		{name: "node affinity", doc: withSection(`
volumeCreation:
  nodeAffinity: {requird: {}}
  capacity: 1Gi
`), want: []string{"spec.volumeCreation.nodeAffinity.requird: Forbidden: unknown field", "spec.volumeCreation.nodeAffinity.required: Required value"}},
		{name: "node affinity without terms", doc: withSection(`
volumeCreation:
  nodeAffinity: {required: {nodeSelectorTerms: []}}
  capacity: 1Gi
`), want: []string{"spec.volumeCreation.nodeAffinity.required.nodeSelectorTerms: Required value"}},

		{name: "pod template extra keys", doc: withSection(`
volumeUnstaging:
  podTemplate:
    apiVersion: v1
    kind: Pod
    spec: {containers: [{name: c, image: img}]}
`), want: []string{"spec.volumeUnstaging.podTemplate.apiVersion: Forbidden: a pod template holds only metadata and spec", "spec.volumeUnstaging.podTemplate.kind: Forbidden"}},
		{name: "pod template not an object", doc: withSection(`
volumeUnstaging:
  podTemplate: [1]
`), want: []string{"spec.volumeUnstaging.podTemplate: Invalid value: \"<list>\": must be a pod template"}},
		{name: "pod template without spec", doc: withSection(`
volumeUnstaging:
  podTemplate: {metadata: {}}
`), want: []string{"spec.volumeUnstaging.podTemplate.spec: Required value"}},
		{name: "unknown and mistyped pod fields", doc: withSection(`
volumeUnstaging:
  podTemplate:
    metadata: {nme: x}
    spec:
      containerz: []
      hostNetwork: "yes"
      containers:
        - name: c
          image: img
          ports: [{containerPort: abc}, {containerPort: 99999999999}]
          resources: {limits: {cpu: lots}}
          command: sh
`), want: []string{
			"spec.volumeUnstaging.podTemplate.metadata.nme: Forbidden: unknown field",
			`spec.volumeUnstaging.podTemplate.spec.containers[0].command: Invalid value: "sh": must be a list`,
			`spec.volumeUnstaging.podTemplate.spec.containers[0].ports[0].containerPort: Invalid value: "abc": must be an integer`,
			`spec.volumeUnstaging.podTemplate.spec.containers[0].ports[1].containerPort: Invalid value: 99999999999: out of range`,
			`spec.volumeUnstaging.podTemplate.spec.containers[0].resources.limits[cpu]: Invalid value: "lots"`,
			`spec.volumeUnstaging.podTemplate.spec.containerz: Forbidden: unknown field`,
			`spec.volumeUnstaging.podTemplate.spec.hostNetwork: Invalid value: "yes": must be a boolean`}},
		{name: "pod rules", doc: withSection(`
volumeValidation:
  podTemplate:
    metadata: {namespace: Bad_NS, labels: {"a b": c}}
    spec:
      restartPolicy: Always
      initContainers: [{name: x, image: img}]
      containers:
        - {name: Bad, image: img}
        - {name: x, image: ""}
        - {image: img, volumeMounts: [{name: v, mountPath: /pav/}]}
      volumes: [{name: pav, emptyDir: {}}]
`), want: []string{
			`spec.volumeValidation.podTemplate.metadata.namespace: Invalid value: "Bad_NS"`,
			`spec.volumeValidation.podTemplate.metadata.labels: Invalid value: "a b"`,
			`spec.volumeValidation.podTemplate.spec.containers[0].name: Invalid value: "Bad"`,
			`spec.volumeValidation.podTemplate.spec.containers[1].name: Duplicate value: "x"`,
			`spec.volumeValidation.podTemplate.spec.containers[1].image: Required value`,
			`spec.volumeValidation.podTemplate.spec.containers[2].name: Required value`,
			`spec.volumeValidation.podTemplate.spec.containers[2].volumeMounts[0].mountPath: Forbidden: /pav is reserved`,
			`spec.volumeValidation.podTemplate.spec.volumes[0].name: Forbidden: the volume name "pav" is reserved`,
			`spec.volumeValidation.podTemplate.spec.restartPolicy: Forbidden: PaV pods run to completion`}},
		{name: "reserved pod metadata", doc: withSection(`
volumeCreation:
  capacity: 1Gi
  podTemplate:
    metadata:
      labels: {app: x, pav.albertofaria.github.io/phase: "{{ params.p }}"}
      annotations: {pav.albertofaria.github.io/succeeded: "true", pav.albertofaria.github.io/result-handle: ".."}
      finalizers: [example.com/f, pav.albertofaria.github.io/staging, "{{ params.f }}"]
    spec: {containers: [{name: c, image: img}]}
`), want: []string{
			"spec.volumeCreation.podTemplate.metadata.labels[pav.albertofaria.github.io/phase]: Forbidden: names under pav.albertofaria.github.io/ are reserved to PaV",
			"spec.volumeCreation.podTemplate.metadata.annotations[pav.albertofaria.github.io/result-handle]: Forbidden",
			"spec.volumeCreation.podTemplate.metadata.annotations[pav.albertofaria.github.io/succeeded]: Forbidden",
			"spec.volumeCreation.podTemplate.metadata.finalizers[1]: Forbidden"}},
		{name: "no containers", doc: withSection(`
volumeDeletion:
  podTemplate: {spec: {containers: []}}
volumeUnstaging:
  podTemplate: {spec: {}}
`), want: []string{"spec.volumeDeletion.podTemplate.spec.containers: Required value", "spec.volumeUnstaging.podTemplate.spec.containers: Required value"}},
		{name: "staging restart policies", doc: strings.Replace(minimal, "        containers:", "        restartPolicy: Always\n        containers:", 1) + indent(`
volumeUnstaging:
  podTemplate: {spec: {restartPolicy: Sometimes, containers: [{name: c, image: i}]}}
`, "  "), want: []string{
			"spec.volumeStaging.podTemplate.spec.restartPolicy: Forbidden: use Never (the default) or OnFailure",
			`spec.volumeUnstaging.podTemplate.spec.restartPolicy: Unsupported value: "Sometimes"`}},
		{name: "literal parts around templates are checked", doc: withSection(`
volumeUnstaging:
  podTemplate:
    spec:
      containers:
        - name: "{{ params.name }}"
          image: "{{ params.image }}"
          imagePullPolicie: Always
          command: ["{{ handle }}"]
          volumeMounts: [{name: x, mountPath: "/pav"}]
`), want: []string{
			"spec.volumeUnstaging.podTemplate.spec.containers[0].imagePullPolicie: Forbidden: unknown field",
			"spec.volumeUnstaging.podTemplate.spec.containers[0].volumeMounts[0].mountPath: Forbidden"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := errorStrings(Validate(provisioner(t, tt.doc)))
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(errs), len(tt.want), strings.Join(errs, "\n"))
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i], w) {
					t.Errorf("error %d:\n got %s\nwant %s", i, errs[i], w)
				}
			}
			_, err := Compile(provisioner(t, tt.doc))
			if (err != nil) != (len(tt.want) > 0) {
				t.Errorf("Compile error %v, Validate found %d", err, len(errs))
			}
		})
	}
}

func TestBrokenTemplateReportedOnce(t *testing.T) {
	errs := Validate(provisioner(t, withSection(`
volumeCreation:
  capacity: "{{ requestedMinCapacity"
`)))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "spec.volumeCreation.capacity: Invalid value: template line") {
		t.Errorf("errors %v", errs)
	}
}

// Every string under spec may be a template, a whole section included.
func TestWholeSectionTemplate(t *testing.T) {
	doc := withSection(`
volumeCreation: "{% set yaml = true %}capacity: {{ requestedMinCapacity }}\nhandle: h-{{ pvc.metadata.name }}"
volumeDeletion: "{% set yaml = true %}{{ {'podTemplate': {'spec': {'containers': [{'name': 'd', 'image': 'img'}]}}} | tojson }}"
`)
	c := compiled(t, doc)
	cfg, err := c.Creation(context.Background(), dynReq(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Handle == nil || *cfg.Handle != "h-"+dynReq().PVC.Name || cfg.Capacity == nil {
		t.Errorf("creation from a whole-section template: %+v", cfg)
	}
	d, err := c.Deletion(context.Background(), dynReq(), nil)
	if err != nil || d.PodTemplate == nil || d.PodTemplate.Spec.Containers[0].Name != "d" {
		t.Errorf("deletion from a whole-section template: %+v %v", d, err)
	}

	bad := compiled(t, withSection(`
volumeCreation: "{% set yaml = true %}[1, 2]"
volumeDeletion: "{% set yaml = true %}podTemplat: {}"
`))
	if _, err := bad.Creation(context.Background(), dynReq(), nil); err == nil || !strings.Contains(err.Error(), "must evaluate to an object") {
		t.Errorf("a section template evaluating to a list: %v", err)
	}
	if _, err := bad.Deletion(context.Background(), dynReq(), nil); err == nil || !strings.Contains(err.Error(), "spec.volumeDeletion.podTemplat: Forbidden: unknown field") {
		t.Errorf("a section template with an unknown key: %v", err)
	}

	if errs := errorStrings(Validate(provisioner(t, withSection(`
volumeDeletion:
  podTemplat: {}
`)))); len(errs) != 1 || !strings.Contains(errs[0], "spec.volumeDeletion.podTemplat: Forbidden: unknown field") {
		t.Errorf("unknown key in a section: %v", errs)
	}
}
