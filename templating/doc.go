// Package templating gives a PavProvisioner its meaning: validation of the
// object, evaluation of its Jinja templates for each phase of a volume's life
// with exactly the context variables of the user guide, the typed result of
// each phase, and the pods PaV creates from them. The controller, the node
// plugin, the admission webhook and `pav render`/`pav validate` all go
// through it, so they agree on every rule.
//
// # Templates
//
// Every string value under the five phase sections (volumeValidation,
// volumeCreation, volumeDeletion, volumeStaging, volumeUnstaging), however
// nested, is a Jinja template (package templating/jinja). Object keys are
// never templates: they are taken literally, so the shape of every object is
// known before evaluation. A template evaluates to a string, or, when it sets
// `yaml` to true, to the YAML-parsed value of its output (which is not
// evaluated again). A value that evaluates to null counts as not set.
//
// Errors name the field in Kubernetes style and the template's line and
// column, e.g.
//
//	spec.volumeStaging.podTemplate.spec.containers[0].command[2]: Invalid value: template line 1, column 4: ...
//
// # API
//
//	Validate(p) field.ErrorList            // every problem; webhook and controller
//	Compile(p) (*Compiled, error)          // Validate + compiled templates; error = utilerrors.Aggregate of *field.Error
//	NewCache().Get(p) (*Compiled, error)   // compiled once per UID+generation, concurrency-safe
//	Cache.Forget(uid)
//
//	(*Compiled).DynamicValidation(ctx, DynamicRequest, PVCGetter) (*ValidationConfig, error)
//	(*Compiled).StaticValidation(ctx, StaticRequest, PVCGetter) (*ValidationConfig, error)
//	(*Compiled).Creation(ctx, DynamicRequest, PVCGetter) (*CreationConfig, error)
//	(*Compiled).Deletion(ctx, DynamicRequest, PVCGetter) (*PodConfig, error)
//	(*Compiled).Staging(ctx, StagingRequest, PVCGetter) (*PodConfig, error)   // PodTemplate never nil
//	(*Compiled).Unstaging(ctx, StagingRequest, PVCGetter) (*PodConfig, error)
//	(*ValidationConfig).Check(VolumeRequest) error   // with DynamicVolumeRequest(pvc) / StaticVolumeRequest(pv)
//
// Names, pods and the /pav files are package protocol's.
//
// Evaluation errors are utilerrors.Aggregate of *field.Error too, except for
// missing request objects and unsupported provisioning modes (plain errors).
// Errors returned by the PVCGetter surface inside the template error of the
// field that called get_pvc.
//
// # Context variables
//
// volumeValidation, dynamic provisioning: requestedVolumeMode (string),
// requestedAccessModes (list of string), requestedMinCapacity (int, bytes,
// pvc.spec.resources.requests.storage), requestedMaxCapacity (int, bytes,
// limits.storage, or none), params (sc.parameters), sc, pvc, and the PaV-Go
// additions selectedNodeName (the node picked by the scheduler for
// WaitForFirstConsumer classes, for other classes of a provisioner with
// spec.topologyKeys the one the controller chose, or none) and, for a provisioner with
// spec.topologyKeys, requisiteTopology and preferredTopology (lists of
// segments, dicts of topology key to value, as external-provisioner computes
// them; none without topology keys, and in volumeDeletion).
//
// volumeValidation, static provisioning: the same request variables taken
// from the PV (min = max = pv.spec.capacity.storage), params
// (pv.spec.csi.volumeAttributes), handle, pv.
//
// volumeCreation and volumeDeletion: the dynamic validation context plus
// defaultHandle ("pvc-<claim uid>").
//
// volumeStaging and volumeUnstaging: volumeMode, accessModes (the PVC's),
// capacity (int, bytes, the PV's), params (pv.spec.csi.volumeAttributes),
// handle, readOnly, pvc, pv, node, and the PaV-Go additions mountOptions
// (list of string) and fsType (string): the mount flags and fsType kubelet
// passed when publishing (the PV's mountOptions and spec.csi.fsType; [] and
// "" for Block volumes), recorded on the staging pod for unstaging.
//
// Objects are given as the API server returns them (apiVersion and kind
// included).
package templating
