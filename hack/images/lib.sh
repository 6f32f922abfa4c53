# Functions shared by hack/images/build.sh and hack/release.sh (sourced).

# fullname NAME: the name containerd stores for a short docker-style name
fullname() {
  local n=$1
  case ${n%%/*} in
    *.*|*:*|localhost) [ "${n#*/}" != "$n" ] && { echo "$n"; return; } ;;
  esac
  [ "${n#*/}" = "$n" ] && n=library/$n
  echo "docker.io/$n"
}

# busybox_rootfs DIR [BUSYBOX]: busybox-static (this machine's, or the BUSYBOX binary, e.g.
# another architecture's of the same version) with every applet linked, plus minimal /etc.
busybox_rootfs() {
  local r=$1 bb=${2:-/bin/busybox} a
  rm -rf "$r"
  mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,root,var,home,dev,proc,sys,mnt,run}
  chmod 1777 "$r/tmp"
  [ -x /bin/busybox ] || { echo "busybox-static is missing: apt-get install busybox-static" >&2; exit 1; }
  cp "$bb" "$r/bin/busybox"
  # the applet list of this machine's busybox (another architecture's cannot run here)
  for a in $(/bin/busybox --list-full); do [ -e "$r/$a" ] || ln -s /bin/busybox "$r/$a"; done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n' > "$r/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$r/etc/group"
  : > "$r/etc/hosts"
}
