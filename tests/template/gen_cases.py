# Regenerates the CASES table of tests/test_template.c from Python jinja2 (render.py's environment):
#   python3 tests/template/gen_cases.py > cases.inc   (then paste into CASES)
import json, sys
sys.path.insert(0, __import__('os').environ.get('SIFT_SHARED', __import__('os').path.join(__import__('os').path.dirname(__file__), '../../../shared')) + '/chat-templates')
import render as R
cases = [
 ("{{ 'a' ~ 1 ~ none ~ true }}", {}),
 ("{{ [1, 'x', none, 1.5, {'k': [true]}] }}", {}),
 ("{{ 1.0 }} {{ 1e20 }} {{ 0.0001 }} {{ 1/3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 10 / 4 }}", {}),
 ("{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ x|tojson(sort_keys=true) }}", {"x": {"b": [1, 2.5, "é\"\n"], "a": None, "c": {}}}),
 ("{% for m in msgs %}{{ loop.index }}/{{ loop.length }}{{ loop.first }}{{ loop.last }}{{ loop.revindex0 }}:{{ m }};{% endfor %}", {"msgs": ["a", "b", "c"]}),
 ("{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
 ("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}{% for k in d %}{{ k }}{% endfor %}", {"d": {"z": 1, "a": 2}}),
 ("{% for x in [] %}x{% else %}empty{% endfor %}", {}),
 ("{% for x in xs if x > 1 %}{{ x }}{{ loop.index }}{% endfor %}", {"xs": [1, 2, 3]}),
 ("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", {}),
 ("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", {}),
 ("{% macro f(a, b='B', c=none) %}[{{ a }}{{ b }}{{ c }}{{ varargs }}{{ kwargs }}]{% endmacro %}{{ f(1) }}{{ f(1, 2, 3, 4) }}{{ f(a=5, z=6) }}", {}),
 ("{% macro wrap(t) %}<{{ caller() }}:{{ t }}>{% endmacro %}{% call wrap('x') %}inner{% endcall %}", {}),
 ("{% macro m() %}{{ caller(7) }}{% endmacro %}{% call(n) m() %}got {{ n }}{% endcall %}", {}),
 ("{% filter upper %}hello {{ 'w' }}{% endfilter %}", {}),
 ("{% set b %}  block {{ 1 }}  {% endset %}[{{ b }}]{% set c | trim %}  t  {% endset %}[{{ c }}]", {}),
 ("{{ s[1:] }}|{{ s[:-1] }}|{{ s[::-1] }}|{{ s[1:4:2] }}|{{ l[-2:] }}|{{ l[::2] }}|{{ s[0] }}{{ l[-1] }}", {"s": "héllo", "l": [1, 2, 3, 4, 5]}),
 ("{{ x is defined }}{{ y is defined }}{{ n is none }}{{ s is string }}{{ d is mapping }}{{ l is iterable }}{{ l is sequence }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}{{ s is not string }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ 'a' in s }}{{ 'q' not in s }}{{ 1 is number }}{{ x is sameas none }}", {"x": None, "n": None, "s": "abc", "d": {}, "l": [1]}),
 ("{{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ ' a '.strip() }}|{{ 'abc'.lstrip('a') }}|{{ 'abc'.rstrip('c') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}", {}),
 ("{{ 'Hello'.upper() }}{{ 'Hello'|lower }}{{ 'hello world'|title }}{{ 'hELLO'|capitalize }}{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'aaa'.replace('a', 'b', 2) }}{{ 'abc'|replace('b', 'X') }}", {}),
 ("{{ d.get('a') }}{{ d.get('zz', 'dflt') }}{{ d.keys()|list }}{{ d.values()|list }}{{ d|dictsort }}{{ d|items|list }}", {"d": {"b": 1, "a": 2}}),
 ("{{ xs|length }}{{ 'héllo'|length }}{{ xs|join(', ') }}{{ xs|first }}{{ xs|last }}{{ xs|reverse|list }}{{ xs|sort }}{{ xs|sum }}{{ xs|min }}{{ xs|max }}{{ [1,1,2]|unique|list }}", {"xs": [3, 1, 2]}),
 ("{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|join }}|{{ ms|rejectattr('role', 'eq', 'user')|list|length }}|{{ ms|map(attribute='role')|list }}|{{ ms|selectattr('x')|list }}", {"ms": [{"role": "user", "c": "a"}, {"role": "bot", "c": "b", "x": 1}, {"role": "user", "c": "c"}]}),
 ("{{ u|default('D') }}{{ n|default('D') }}{{ ''|default('D', true) }}{{ u|d('E') }}{{ '12'|int + 1 }}{{ 'x'|int }}{{ '1.5'|float }}{{ 3|string + 'a' }}{{ -3|abs }}{{ 2.567|round(2) }}", {"n": None}),
 ("{{ 'a' if x else 'b' }}{{ 'c' if not x }}{{ x and 'y' }}{{ x or 'z' }}{{ 1 < 2 < 3 }}{{ 1 == 1.0 }}{{ [1,2] == [1,2] }}{{ 'a' < 'b' }}", {"x": 0}),
 ("{{ \"it's\" }}{{ 'say \"hi\"' }}{{ 'a\\nb' }}{{ '\\u00e9' }}{{ 'a' 'b' }}", {}),
 ("{{ ['it\\'s', \"q\\\"\", 'a\\nb', 'é'] }}", {}),
 ("{{ {'a': 1, 'b': none, 'c': [true, 'x']} }}{{ x }}", {"x": {"k": 1.5}}),
 ("  {% if true %}\n  yes\n  {% endif %}\n  {{- ' no' }}\n{# comment #}\nend  \n", {}),
 ("a\n{%- if true -%}\n  b  \n{%- endif -%}\nc\n{%+ if true %}d{% endif %}\n  {% if true +%}\ne\n{% endif %}", {}),
 ("{% for m in messages %}\n    {% if m.role == 'user' %}\n        U: {{ m.content }}\n    {% endif %}\n{% endfor %}\n", {"messages": [{"role": "user", "content": "hi"}]}),
 ("{{ strftime_now('%Y-%m-%d %d %B %b') }}", {}),
 ("{{ raise_exception('bad ' ~ 1) }}", {}),
 ("{{ u.x }}", {}),
 ("{{ d.missing.x }}", {"d": {}}),
 ("{{ 'a' + 1 }}", {}),
 ("{% for x in n %}{% endfor %}", {"n": None}),
 ("{% set l = [] %}{{ l.append(1) }}", {}),
 ("{% set d = {} %}{% set d.x = 1 %}", {}),
 ("{% if %}", {}),
 ("{% for x in y %}", {}),
 ("{% if x %}{% endfor %}", {}),
 ("{{ 1 + }}", {}),
 ("{{ x | nosuchfilter }}", {}),
 ("{% if false %}{{ x | nosuchfilter }}{% endif %}ok", {}),
 ("{{ 1 / 0 }}", {}),
 ("{{ ns.x }}{% set ns = namespace(x=1) %}{{ ns.x }}", {}),
 ("{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(5) }}", {}),
 ("{{ x.0 }}{{ x[1] }}{{ d['k'] }}{{ d.k }}", {"x": ["a", "b"], "d": {"k": "v"}}),
 ("{{ loop }}", {}),
 ("{% for a in [1,2] %}{% for b in [3,4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
 ("{{ '%s-%d' | format('a', 3) }}{{ [1,2,3,4,5]|batch(2)|list }}{{ 'a\nb'|indent(2, true) }}{{ 'one two'|wordcount }}", {}),
 ("{{ (1, 2) }}{{ () }}{{ [1][0:5] }}{{ 'x' * 3 }}{{ [0] * 2 }}{{ -(3) }}{{ 10 - 2 * 3 }}{{ (10 - 2) * 3 }}{{ 2 ** 3 ** 2 }}", {}),
 ("{{ x | tojson(ensure_ascii=true) }}{{ x|tojson(separators=(',', ':')) }}", {"x": {"a": "é😀", "b": [1, 2]}}),
 ("{{ 'abc'.find('c') }}{{ 'a-b'.split('-')|join('+') }}{{ 'x'.join(['a','b']) }}{{ 'Ab1'.isalnum() }}{{ '12'.isdigit() }}", {}),
 ("{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set t = (3, 4) %}{{ t[1] }}", {}),
 ("{{ 5 if x is defined }}|{{ none }}|{{ u }}|{{ true }}", {}),
 ("{{ '%s and %s' % ('a', 1) }}|{{ 'n=%d' % 3 }}|{{ '%s' % [1] }}|{{ 'hello world2x-y (z'|title }}{{ 'hello world2x'.title() }}", {}),
 ("{{ '%s %s' % ('a',) }}", {}),
 ("a {% raw %}{{ x }}{% if %}{% endraw %} b\n  {%- raw -%}  r  {%- endraw %}\nc", {}),
 ("{% raw %}never closed", {}),
]
out = []
for t, c in cases:
    try:
        env = R.make_env()
        res = env.from_string(t).render(**c)
        out.append((t, json.dumps(c), True, res))
    except Exception as e:
        out.append((t, json.dumps(c), False, f"{type(e).__name__}: {e}"))
def cstr(s):
    b = s.encode('utf-8')
    r = '"'
    for ch in b:
        if ch == 0x22: r += '\\"'
        elif ch == 0x5c: r += '\\\\'
        elif ch == 0x0a: r += '\\n'
        elif 0x20 <= ch < 0x7f: r += chr(ch)
        else: r += '\\%03o' % ch
    return r + '"'
for t, c, ok, res in out:
    print("    {%s,\n     %s,\n     %d, %s}," % (cstr(t), cstr(c), ok, cstr(res)))
