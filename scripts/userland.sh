# Sourced by the scripts that assemble a root filesystem from a userland
# of either architecture (scripts/image.sh, scripts/vmtest/run.sh): which
# userland, and how to copy its programs with the libraries they load.
#
# userland ARCH sets SYSROOT (where ARCH's programs are: the host's own for
# its architecture, else Debian's packages unpacked by
# scripts/vmtest/sysroot.sh) and TRIPLET (its library directory's name).
userland() {
	case $1 in
	amd64) TRIPLET=x86_64-linux-gnu ;;
	arm64) TRIPLET=aarch64-linux-gnu ;;
	*) echo "userland: no userland for architecture $1 (amd64, arm64)" >&2; return 1 ;;
	esac
	SYSROOT=""
	if [ "$1" != "$(dpkg --print-architecture)" ]; then
		SYSROOT=$(pwd)/.cache/vmtest/sysroot-$1
		scripts/vmtest/sysroot.sh "$1" "$SYSROOT"
	fi
}

# copy_libs ROOT FILE: the interpreter and the libraries FILE loads, and
# theirs, from SYSROOT into ROOT where a loader with no ld.so.cache looks
# for them: the architecture's library directories. Read from the ELF
# headers: readelf reads any architecture's, where ldd would run the
# loader, an arm64 one included.
copy_libs() {
	local root=$1 file=$2 lib dir
	for lib in $(readelf -lW "$file" | sed -n 's/.*program interpreter: \(.*\)]$/\1/p'); do
		[ -e "$root$lib" ] || { mkdir -p "$root$(dirname "$lib")"; cp -L "$SYSROOT$lib" "$root$lib"; }
	done
	for lib in $(readelf -dW "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'); do
		for dir in /lib/$TRIPLET /usr/lib/$TRIPLET ""; do
			[ -n "$dir" ] || { echo "userland: $lib, which $file loads, is not in $SYSROOT/{,usr/}lib/$TRIPLET" >&2; return 1; }
			[ -e "$SYSROOT$dir/$lib" ] || continue
			if [ ! -e "$root$dir/$lib" ]; then
				mkdir -p "$root$dir"
				cp -L "$SYSROOT$dir/$lib" "$root$dir/$lib"
				copy_libs "$root" "$SYSROOT$dir/$lib"
			fi
			break
		done
	done
}

# copy_with_libs ROOT BIN DEST: a program of SYSROOT (or of this
# repository, when BIN is relative) at DEST under ROOT, with what it loads.
copy_with_libs() {
	local root=$1 bin=$2 dest=$3
	case $bin in /*) bin=$SYSROOT$bin ;; esac
	mkdir -p "$root/$(dirname "$dest")"
	cp -L "$bin" "$root/$dest"
	copy_libs "$root" "$bin"
}

# copy_xtables ROOT: iptables' match and target extensions, which it loads
# to read or print each rule, with what they load.
copy_xtables() {
	local root=$1 so
	mkdir -p "$root/usr/lib/$TRIPLET/xtables"
	for so in "$SYSROOT/usr/lib/$TRIPLET/xtables"/*.so; do
		cp "$so" "$root/usr/lib/$TRIPLET/xtables/"
		copy_libs "$root" "$so"
	done
}
