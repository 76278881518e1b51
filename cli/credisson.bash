# bash completion for credisson(1): commands (and the subcommands of semaphore, latch and
# ratelimit), their flags, the values of --on-lost,
# --on-unavailable and --replica-sync, and files for the TLS options. Installed as share/bash-completion/completions/credisson.

_credisson()
{
    local cur prev cmd i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}

    # The command is the first word after the global options (and their values). Bash
    # splits a URL at ':' (COMP_WORDBREAKS): a ':' word and the one after it belong to
    # the word before.
    cmd=
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        --url | --watchdog-ms | --cacert | --cacertdir | --cert | --key | --sni | --label) ((i++)) ;;
        : | =) ((i++)) ;;
        -*) ;;
        *)
            cmd=${COMP_WORDS[i]}
            break
            ;;
        esac
    done

    # After "run ... NAME --" the rest is CMD: complete commands and files.
    if [[ $cmd == run ]]; then
        for ((i = i + 1; i < COMP_CWORD; i++)); do
            if [[ ${COMP_WORDS[i]} == -- ]]; then
                if ((i + 1 == COMP_CWORD)); then
                    COMPREPLY=($(compgen -c -- "$cur"))
                else
                    COMPREPLY=($(compgen -f -- "$cur"))
                fi
                return
            fi
        done
    fi

    # "--on-lost=VALUE": bash splits the word at '='.
    if [[ $prev == = && ${COMP_WORDS[COMP_CWORD - 2]} == --on-lost ]]; then
        COMPREPLY=($(compgen -W "term kill ignore" -- "$cur"))
        return
    fi
    if [[ $prev == = && ${COMP_WORDS[COMP_CWORD - 2]} == --on-unavailable ]]; then
        COMPREPLY=($(compgen -W "fail skip degrade" -- "$cur"))
        return
    fi
    case $prev in
    --url | --watchdog-ms | --wait | --lease | --grace | -E | --conflict-exit-code | --sni | \
        --permits | --count | --timeout | --interval | --samples | --prefix | --procs | --seconds | \
        --second-url | --rate | --keep-alive | --label | --max-names | --listen)
        return
        ;;
    --replica-sync)
        COMPREPLY=($(compgen -W "auto on off if-allowed" -- "$cur"))
        return
        ;;
    --cacert | --cert | --key)
        COMPREPLY=($(compgen -f -- "$cur"))
        return
        ;;
    --cacertdir)
        COMPREPLY=($(compgen -d -- "$cur"))
        return
        ;;
    --on-lost)
        COMPREPLY=($(compgen -W "term kill ignore" -- "$cur"))
        return
        ;;
    --on-unavailable)
        COMPREPLY=($(compgen -W "fail skip degrade" -- "$cur"))
        return
        ;;
    esac

    # The commands, as cli/main.c's COMMANDS table has them (tests/check_docs.py compares).
    local commands="run status unlock watch list exporter semaphore latch ratelimit doctor verify"
    local opts
    case $cmd in
    "")
        if [[ $cur == -* ]]; then
            opts="--url --watchdog-ms --cacert --cacertdir --cert --key --sni --insecure --label
                  --help --version"
        else
            opts=$commands
        fi
        ;;
    run) opts="--wait -n --nonblock --lease --fair --read --write --fenced --spin --nonreentrant
               --nonreentrant-fair --permits --rate --on-lost= --on-unavailable= --grace -E
               --conflict-exit-code --verbose --help" ;;
    status) opts="--json --help" ;;
    unlock) opts="--force --fair --read --write --fenced --delete-non-lock --help" ;;
    watch) opts="--json --count --timeout --interval --help" ;;
    list) opts="--json --openmetrics --timeout --count --max-names --help" ;;
    exporter) opts="--listen --max-names --count --timeout --help" ;;
    doctor) opts="--json --samples --timeout --prefix --help" ;;
    verify) opts="--procs --seconds --permits --failover --replica-sync --second-url --prefix
                  --json --help" ;;
    semaphore) opts="status set add --json --help" ;;
    latch) opts="set count-down wait status --wait --json --help" ;;
    ratelimit) opts="status set delete --json --per-client --keep-alive --reset --help" ;;
    *) return ;;
    esac
    if [[ $cmd == "" || $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        [[ ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
    fi
}

complete -F _credisson credisson
